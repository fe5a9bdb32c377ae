from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.views import APIView

from finops.api import (
    anomalies,
    chargeback,
    notification_channels,
    periods,
    preferences,
    pricing_settings,
    recommendations,
    run_estimates,
    run_waste,
    views,
)
from finops.api.budgets import BudgetViewSet
from finops.api.routers import ApiRouter
from finops.api.run_energy import EnergyView

router = ApiRouter()
router.register("teams", views.TeamViewSet, basename="api-team")
router.register("runs", views.RunCostViewSet, basename="api-run")
router.register("anomalies", anomalies.AnomalyViewSet, basename="api-anomaly")
router.register("budgets", BudgetViewSet, basename="api-budget")
router.register(
    "notification-channels",
    notification_channels.NotificationChannelViewSet,
    basename="api-notification-channel",
)
router.register(
    "recommendations", recommendations.RecommendationViewSet, basename="api-recommendation"
)
router.register("import-batches", views.ImportBatchViewSet, basename="api-import-batch")

# Plain APIViews outside the router, each named once: its path under /api/v1/ and its entry on
# the root (/api/v1/) beside the viewsets both come from this list.
PLAIN_VIEWS: list[tuple[str, type[APIView], str]] = [
    ("costs", views.CostsView, "api-costs"),
    ("energy", EnergyView, "api-energy"),
    ("endpoints", views.EndpointsView, "api-endpoints"),
    ("pricing-comparison", views.PricingComparisonView, "api-pricing-comparison"),
    ("pricing-settings", pricing_settings.PricingSettingsView, "api-pricing-settings"),
    ("reconciliation", views.ReconciliationView, "api-reconciliation"),
    ("run-estimates", run_estimates.RunEstimateView, "api-run-estimates"),
    ("statements", chargeback.StatementListView, "api-statements"),
    ("waste", run_waste.WasteView, "api-waste"),
    (
        "me/notification-preferences",
        preferences.NotificationPreferenceView,
        "api-notification-preferences",
    ),
]
for prefix, _view, url_name in PLAIN_VIEWS:
    router.add_root_entry(prefix, url_name)
router.add_root_entry("schema", "schema")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # No Swagger UI: drf-spectacular's view loads it from a CDN unless the sidecar package is
    # installed, and deployments may have no internet. /api/schema/ serves the OpenAPI file.
    *(path(f"v1/{prefix}/", view.as_view(), name=name) for prefix, view, name in PLAIN_VIEWS),
    path("v1/waste/advice/", run_waste.WasteAdviceView.as_view(), name="api-waste-advice"),
    path(
        "v1/periods/<str:month>/checks/",
        periods.PeriodChecksView.as_view(),
        name="api-period-checks",
    ),
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
    path("v1/", include(router.urls)),
]
