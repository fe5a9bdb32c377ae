from django.urls import path

from finops.web import runs_views, upload_views, views

app_name = "web"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("teams/<slug:slug>/", views.team_detail, name="team"),
    path("runs/", runs_views.runs, name="runs"),
    # Run ids may hold "/" and spaces: <path:> keeps them whole (reverse() quotes them).
    path("runs/<slug:team_slug>/<path:run_id>/", views.run_detail, name="run"),
    path("reconciliation/", views.reconciliation, name="reconciliation"),
    path("imports/", views.import_batches, name="imports"),
    path("imports/upload/", upload_views.upload, name="imports-upload"),
    path("imports/<int:batch_id>/progress/", upload_views.progress, name="imports-progress"),
    path("endpoints/", views.endpoints, name="endpoints"),
    # Endpoint names come from labels and CSVs: <path:> keeps a "/" in one whole.
    path("endpoints/<path:name>/", views.endpoint_detail, name="endpoint"),
]
