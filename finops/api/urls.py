from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from finops.api import views

router = DefaultRouter()
router.register("teams", views.TeamViewSet, basename="api-team")
router.register("runs", views.RunCostViewSet, basename="api-run")
router.register("import-batches", views.ImportBatchViewSet, basename="api-import-batch")

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
    path("v1/reconciliation/", views.ReconciliationView.as_view(), name="api-reconciliation"),
    path("v1/", include(router.urls)),
]
