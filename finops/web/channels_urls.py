from django.urls import path

from finops.web import channels_views as channel_views

app_name = "channels"
urlpatterns = [
    path("", channel_views.channel_list, name="list"),
    path("<int:pk>/delete/", channel_views.channel_remove, name="delete"),
    path("<int:pk>/test/", channel_views.channel_test, name="test"),
]
