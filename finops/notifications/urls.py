from django.urls import path

from finops.notifications import views

app_name = "notifications"
urlpatterns = [path("", views.preferences, name="preferences")]
