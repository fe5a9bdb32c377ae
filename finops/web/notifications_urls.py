from django.urls import path

from finops.web import notifications_views as views

app_name = "notifications"
urlpatterns = [path("", views.preferences, name="preferences")]
