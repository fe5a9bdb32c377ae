from django.urls import path

from finops.web import tokens_views as views

app_name = "tokens"
urlpatterns = [
    path("", views.token_list, name="list"),
    path("<int:pk>/revoke/", views.token_revoke, name="revoke"),
]
