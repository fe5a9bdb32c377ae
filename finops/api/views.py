"""REST API v1. Every endpoint needs a logged-in user (settings); some need finance."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from billing_ingest.models import ImportBatch
from finops.api.filters import RunCostFilterSet, month_format, month_parse
from finops.api.schema import month_parameter
from finops.api.serializers import (
    CostPointSerializer,
    CostSeriesReportSerializer,
    CostsQuerySerializer,
    EndpointMonthSerializer,
    EndpointsQuerySerializer,
    ImportBatchSerializer,
    MonthQuerySerializer,
    ReconciliationSerializer,
    RunCostSerializer,
    TeamSerializer,
)
from finops.attribution.models import RunCost
from finops.attribution.selectors import (
    COST_GROUP_BY,
    SECONDS_PER_HOUR,
    cost_series,
    reconciliation_for_month,
    run_cost_list_visible,
)
from finops.attribution.timeseries import INTERVALS, cost_points
from finops.currency.selectors import FxRateMissing
from finops.inference.selectors import endpoint_month_totals
from finops.org.models import Team
from finops.org.permissions import IsFinance, user_is_finance
from finops.org.selectors import endpoint_owners_visible, team_list_visible


class TeamViewSet(viewsets.ReadOnlyModelViewSet[Team]):
    """Teams the caller may see: all for finance, their own for a team lead."""

    serializer_class = TeamSerializer
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Team]:
        return team_list_visible(user=self.request.user).order_by("name", "slug")


class RunCostViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[RunCost]):
    """Training-run cost rollups: filter with ?month=YYYY-MM, &team=slug, &cluster=, &currency=."""

    serializer_class = RunCostSerializer
    filterset_class = RunCostFilterSet

    def get_queryset(self) -> QuerySet[RunCost]:
        user = self.request.user
        return run_cost_list_visible(
            teams=team_list_visible(user=user), include_unowned=user_is_finance(user)
        )


class ReconciliationView(APIView):
    """Bill vs ledger for a billing month (finance only). Money as decimal strings."""

    permission_classes = [IsAuthenticated, IsFinance]

    @extend_schema(
        parameters=[month_parameter(required=True)],
        responses=ReconciliationSerializer,
    )
    def get(self, request: Request) -> Response:
        query = MonthQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = month_parse(query.validated_data["month"])
        return Response(ReconciliationSerializer(reconciliation_for_month(month=month)).data)


class CostsView(APIView):
    """Attributed cost per team, provider or category, converted to one currency per day.
    Teams the caller may see; the no-team bucket for finance only.

    Without `interval`: a month's report (daily points per series, totals). With
    `interval=day|week|month`: a flat, Grafana-friendly list `[{"t", "<group_by>", "cost",
    "currency"}]` over a billing month or over days `since`..`until`."""

    @extend_schema(
        parameters=[
            month_parameter(required=False, description="Billing month, YYYY-MM (required "
                            "without interval; with it, instead of since/until)."),
            OpenApiParameter(
                "currency", OpenApiTypes.STR, description="ISO 4217; default reporting currency"
            ),
            OpenApiParameter("group_by", OpenApiTypes.STR, enum=sorted(COST_GROUP_BY)),
            OpenApiParameter("interval", OpenApiTypes.STR, enum=list(INTERVALS),
                             description="Answer as flat points, one per bucket and key."),
            OpenApiParameter("since", OpenApiTypes.DATE, description="With interval: first day."),
            OpenApiParameter("until", OpenApiTypes.DATE,
                             description="With interval: last day (default today)."),
        ],
        responses=PolymorphicProxySerializer(
            component_name="CostsResponse",
            serializers=[CostSeriesReportSerializer, CostPointSerializer(many=True)],
            resource_type_field_name=None,
            many=False,
        ),
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        query = CostsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        user = request.user
        scope: dict[str, Any] = {
            "teams": team_list_visible(user=user),
            "include_unowned": user_is_finance(user),
            "currency": params.get("currency") or settings.FINOPS_REPORTING_CURRENCY,
            "group_by": params["group_by"],
        }
        month = month_parse(params["month"]) if "month" in params else None
        try:
            if "interval" in params:
                points = cost_points(
                    **scope, interval=params["interval"], month=month,
                    since=params.get("since"), until=params.get("until"),
                )  # fmt: skip
                context = {"group_by": params["group_by"]}
                return Response(CostPointSerializer(points, many=True, context=context).data)
            assert month is not None  # the query serializer requires it without interval
            report = cost_series(month=month, **scope)
        except FxRateMissing as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(CostSeriesReportSerializer(report).data)


class ImportBatchViewSet(viewsets.ReadOnlyModelViewSet[ImportBatch]):
    """Import batches, newest first (finance only)."""

    serializer_class = ImportBatchSerializer
    permission_classes = [IsAuthenticated, IsFinance]
    queryset = ImportBatch.objects.order_by("-created_at", "-id")
    filterset_fields = ["kind", "status", "source"]


class EndpointsView(APIView):
    """Inference endpoints of a month, one row per endpoint and billing currency: cost, usage,
    unit costs and idle share. Endpoints of the teams the caller may see (an endpoint belongs to
    the team of its ledger rows); those of no team for finance only."""

    @extend_schema(
        parameters=[
            month_parameter(required=True),
            OpenApiParameter("team", OpenApiTypes.STR, description="team slug"),
        ],
        responses=EndpointMonthSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        query = EndpointsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = month_parse(query.validated_data["month"])
        owners = endpoint_owners_visible(
            user=request.user, month=month, team_slug=query.validated_data.get("team")
        )
        rows = [
            {
                "endpoint": t.endpoint,
                "team": owners[t.endpoint].slug,
                "month": month_format(month),
                "currency": t.currency,
                "cost": t.cost,
                "gpu_hours": t.gpu_seconds / SECONDS_PER_HOUR,
                "requests": t.requests,
                "tokens": t.tokens,
                "cost_per_1k_requests": t.cost_per_1k_requests,
                "cost_per_1m_tokens": t.cost_per_1m_tokens,
                "idle_share": t.idle_share,
                "node_cost": t.node_cost,
                "node_idle_cost": t.node_idle_cost,
            }
            for t in endpoint_month_totals(month=month)
            if t.endpoint in owners
        ]
        return Response(EndpointMonthSerializer(rows, many=True).data)
