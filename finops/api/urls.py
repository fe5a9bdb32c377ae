from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from finops.api import (
    anomalies,
    chargeback,
    periods,
    preferences,
    pricing_settings,
    recommendations,
    views,
)
from finops.api.budgets import BudgetViewSet
from finops.api.routers import ApiRouter

router = ApiRouter()
router.register("teams", views.TeamViewSet, basename="api-team")
router.register("runs", views.RunCostViewSet, basename="api-run")
router.register("anomalies", anomalies.AnomalyViewSet, basename="api-anomaly")
router.register("budgets", BudgetViewSet, basename="api-budget")
router.register(
    "recommendations", recommendations.RecommendationViewSet, basename="api-recommendation"
)
router.register("import-batches", views.ImportBatchViewSet, basename="api-import-batch")
# Plain APIViews: listed on the root (/api/v1/) beside the viewsets.
router.add_root_entry("costs", "api-costs")
router.add_root_entry("endpoints", "api-endpoints")
router.add_root_entry("pricing-comparison", "api-pricing-comparison")
router.add_root_entry("reconciliation", "api-reconciliation")
router.add_root_entry("pricing-settings", "api-pricing-settings")
router.add_root_entry("statements", "api-statements")
router.add_root_entry("schema", "schema")
router.add_root_entry("me/notification-preferences", "api-notification-preferences")
router.add_root_entry("statements", "api-statements")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # No Swagger UI: drf-spectacular's view loads it from a CDN unless the sidecar package is
    # installed, and deployments may have no internet. /api/schema/ serves the OpenAPI file.
    path("v1/costs/", views.CostsView.as_view(), name="api-costs"),
    path("v1/endpoints/", views.EndpointsView.as_view(), name="api-endpoints"),
    path(
        "v1/pricing-comparison/",
        views.PricingComparisonView.as_view(),
        name="api-pricing-comparison",
    ),
    path(
        "v1/pricing-settings/",
        pricing_settings.PricingSettingsView.as_view(),
        name="api-pricing-settings",
    ),
    path("v1/reconciliation/", views.ReconciliationView.as_view(), name="api-reconciliation"),
    path(
        "v1/periods/<str:month>/checks/",
        periods.PeriodChecksView.as_view(),
        name="api-period-checks",
    ),
    path("v1/statements/", chargeback.StatementListView.as_view(), name="api-statements"),
    path(
        "v1/statements/<slug:team>/<str:month>.<str:extension>",
        chargeback.StatementFileView.as_view(),
        name="api-statement-file",
    ),
    path(
        "v1/statements/<slug:team>/<str:month>/",
        chargeback.StatementDetailView.as_view(),
        name="api-statement",
    ),
    path(
        "v1/me/notification-preferences/",
        preferences.NotificationPreferenceView.as_view(),
        name="api-notification-preferences",
    ),
    path("v1/", include(router.urls)),
]
