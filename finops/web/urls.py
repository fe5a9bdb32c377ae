from django.urls import path

from finops.web import (
    anomalies_views,
    chargeback_views,
    explorer_views,
    onboarding_views,
    plan_views,
    pricing_views,
    runs_views,
    upload_views,
    views,
)

app_name = "web"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("teams/<slug:slug>/", views.team_detail, name="team"),
    path("runs/", runs_views.runs, name="runs"),
    path("runs/plan/", plan_views.run_planner, name="run-plan"),
    path("runs/plan/keep/", plan_views.run_plan_keep, name="run-plan-keep"),
    path("explorer/", explorer_views.explorer, name="explorer"),
    # Run ids may hold "/" and spaces: <path:> keeps them whole (reverse() quotes them).
    path("runs/<slug:team_slug>/<path:run_id>/", views.run_detail, name="run"),
    path("anomalies/", anomalies_views.anomaly_list, name="anomalies"),
    path("anomalies/<int:pk>/", anomalies_views.anomaly_detail, name="anomaly"),
    path(
        "teams/<slug:slug>/statements/<str:month>/",
        chargeback_views.statement,
        name="statement",
    ),
    path(
        "teams/<slug:slug>/statements/<str:month>.<str:extension>",
        chargeback_views.statement_file,
        name="statement-file",
    ),
    path("close/", chargeback_views.close_periods, name="close"),
    path("close/<str:month>/", chargeback_views.close_review, name="close-review"),
    path("close/<str:month>/<str:action>/", chargeback_views.close_action, name="close-action"),
    path("audit/", chargeback_views.audit_log, name="audit"),
    path("pricing/", pricing_views.pricing, name="pricing"),
    path("pricing/settings/", pricing_views.pricing_settings, name="pricing_settings"),
    path(
        "pricing/recommendations/<int:pk>/status/",
        pricing_views.recommendation_status,
        name="recommendation_status",
    ),
    path("reconciliation/", views.reconciliation, name="reconciliation"),
    path("imports/", upload_views.import_batches, name="imports"),
    path("pipeline/", views.pipeline, name="pipeline"),
    path("pipeline/run/", views.pipeline_run_again, name="pipeline-run"),
    path("imports/upload/", upload_views.upload, name="imports-upload"),
    path("imports/<int:batch_id>/progress/", upload_views.progress, name="imports-progress"),
    path("onboarding/", onboarding_views.onboarding_page, name="onboarding"),
    path("onboarding/teams/", onboarding_views.team_add, name="onboarding-team"),
    path("onboarding/mappings/", onboarding_views.mapping_add, name="onboarding-mapping"),
    path("onboarding/invitations/", onboarding_views.invite, name="onboarding-invite"),
    path("onboarding/sign-in-rules/", onboarding_views.sso_rule_add, name="onboarding-sso"),
    path(
        "onboarding/mappings/<int:pk>/delete/",
        onboarding_views.rule_delete,
        {"kind": "mapping"},
        name="onboarding-mapping-delete",
    ),
    path(
        "onboarding/sign-in-rules/<int:pk>/delete/",
        onboarding_views.rule_delete,
        {"kind": "sso"},
        name="onboarding-sso-delete",
    ),
    path("endpoints/", views.endpoints, name="endpoints"),
    # Endpoint names come from labels and CSVs: <path:> keeps a "/" in one whole.
    path("endpoints/<path:name>/", views.endpoint_detail, name="endpoint"),
]
