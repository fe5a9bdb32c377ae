"""REST API v1. Every endpoint needs a logged-in user (settings); some need finance."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from billing_ingest.models import ImportBatch
from finops.api.cache import cached_read
from finops.api.rows import RUN_VALUES, cost_point_bodies, run_cost_bodies
from finops.api.run_detail import RunDetailSerializer
from finops.api.schema import CURRENCY_PATTERN, month_parameter, team_parameter
from finops.api.serializers import (
    CostPointSerializer,
    CostSeriesReportSerializer,
    CostsQuerySerializer,
    EndpointMonthSerializer,
    EndpointsQuerySerializer,
    ImportBatchSerializer,
    MonthQuerySerializer,
    PricingQuerySerializer,
    ReconciliationSerializer,
    RunCostSerializer,
    TeamSerializer,
)
from finops.api.team_efficiency import (
    EFFICIENCY_SCHEMA,
    TeamMonthEfficiencySerializer,
    efficiency_months,
)
from finops.api.teams import teams_asked
from finops.attribution.models import Category, RunCost
from finops.attribution.selectors.explorer import (
    AMORTISED,
    COST_MEASURES,
    GROUP_BY_PATTERN,
    TAG_FILTER_PATTERN,
    ExplorerError,
    explorer_points,
    explorer_series,
)
from finops.attribution.selectors.explorer_filters import DIMENSION_FILTERS, CostExplorerFilterSet
from finops.attribution.selectors.reconciliation import reconciliation_for_month
from finops.attribution.selectors.reporting import SECONDS_PER_HOUR
from finops.attribution.selectors.runs import run_cost_list_visible
from finops.attribution.selectors.timeseries import (
    COST_GROUP_BY,
    INTERVALS,
    cost_points,
    cost_series,
)
from finops.core.months import month_format, month_parse
from finops.currency.selectors import FxRateMissing
from finops.economics.filters import RunFilterSet
from finops.economics.selectors import team_efficiency_stored, teams_measured_power_stored
from finops.energy.selectors import measured_power, run_energy
from finops.inference.selectors import endpoint_month_totals
from finops.org.models import Team
from finops.org.permissions import IsFinance, user_is_finance
from finops.org.selectors import team_list_visible
from finops.pricing.comparisons import run_pricing, team_month_pricing
from finops.run_metrics.selectors import RunKey


class TeamViewSet(viewsets.ReadOnlyModelViewSet[Team]):
    """Teams the caller may see: all for finance, their own for a team lead."""

    serializer_class = TeamSerializer
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Team]:
        return team_list_visible(user=self.request.user).order_by("name", "slug")

    @cached_read
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @EFFICIENCY_SCHEMA
    @action(detail=True, methods=["get"], url_path="efficiency", pagination_class=None)
    def efficiency(self, request: Request, slug: str | None = None) -> Response:
        """What the team's training runs bought, month by month (a run counts in the month
        it ended, with its whole-run figures): useful tokens, their cost, cost per 1M tokens,
        GPU-hour weighted MFU, the best and worst run."""
        team = self.get_object()
        rows = team_efficiency_stored(team=team, months=efficiency_months(request.query_params))
        return Response(TeamMonthEfficiencySerializer(rows, many=True).data)


class RunCostViewSet(viewsets.ReadOnlyModelViewSet[RunCost]):
    """Training-run cost rollups: filter with ?month=YYYY-MM, &team=slug, &cluster=, &currency=.
    `{id}/pricing/`: the run's pricing comparison (actual vs on demand, spot, reserved, on-prem).
    Where part of the run's usage has no list price (no ListCost in the bill, none in the price
    catalogue), `on_demand.cost`, `on_demand.savings` and the spot and reserved costs (priced
    from it) are null, with `unknown_reason` and `on_demand.unpriced_cost` saying why and how
    much."""

    serializer_class = RunCostSerializer
    filterset_class = RunFilterSet

    def get_serializer_class(self) -> type[RunCostSerializer]:
        # The detail adds the whole `efficiency` object; the list carries its headline.
        # The detail adds `efficiency`, `waste` with the `attempts` and `energy`
        # (finops.api.run_detail).
        return RunDetailSerializer if self.action == "retrieve" else RunCostSerializer

    def get_queryset(self) -> QuerySet[RunCost]:
        user = self.request.user
        return run_cost_list_visible(
            teams=team_list_visible(user=user), include_unowned=user_is_finance(user)
        )

    @cached_read
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # A JSON page from `.values()` rows as plain dicts (run_cost_bodies: the serializer's
        # body, without its per-field cost); CSV and `.json`-suffixed URLs take DRF's path.
        # (A comment, not a docstring: the schema would take it as the operation's text.)
        queryset = self.filter_queryset(self.get_queryset())
        if self.format_kwarg:
            return super().list(request, *args, **kwargs)
        page = self.paginate_queryset(queryset.values(*RUN_VALUES))
        if page is None:
            return super().list(request, *args, **kwargs)
        return self.get_paginated_response(run_cost_bodies(page, request))

    @extend_schema(responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["get"])
    def pricing(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        key = RunKey(run.team_id, "", run.run_id, run.billing_currency)
        energy = run_energy(key, [run.billing_period])
        return Response(
            run_pricing(
                run=run, org_wide=user_is_finance(request.user), measured=measured_power(energy)
            )
        )


class PricingComparisonView(APIView):
    """Per team (and billing currency) of a month: actual, on-demand equivalent, spot, reserved
    1y / 3y, on-prem, the mix and the assumptions. Teams the caller may see; `team` narrows.
    An on-demand figure that is unknown (usage with no list price in the bill or the catalogue)
    is null, as are the savings, spot and reserved costs priced from it, with `unknown_reason`."""

    @extend_schema(
        parameters=[
            month_parameter(required=True),
            team_parameter(),
        ],
        # One pricing body per team (and billing currency): a list.
        responses={200: {"type": "array", "items": {"type": "object"}}},
    )
    def get(self, request: Request) -> Response:
        query = PricingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            month = month_parse(query.validated_data["month"])
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        slug = query.validated_data.get("team")
        teams = teams_asked(user=request.user, slug=slug)
        measured = teams_measured_power_stored(
            month=month, team_ids=teams.values_list("pk", flat=True)
        )
        return Response(
            team_month_pricing(
                month=month, teams=teams, org_wide=user_is_finance(request.user), power=measured
            )
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
    """Cost grouped by team, provider, category, account, service, region, instance type or
    any tag key (`group_by=tag:KEY`) and filtered by each, converted to one currency per day.
    Amortised (EffectiveCost) by default; `cost=invoiced` for BilledCost. Teams, categories,
    providers, accounts and services come from the ledger (teams the caller may see; the
    no-team bucket for finance only); regions, instance types, tags and invoiced cost from the
    bill (finance only, and not per team: a 400 says so when a question mixes the two).

    Without `interval`: a month's report (daily points per series, totals). With
    `interval=day|week|month`: a flat, Grafana-friendly list `[{"t", "<group_by>", "cost",
    "currency"}]` over a billing month or over days `since`..`until`."""

    @extend_schema(
        parameters=[
            month_parameter(required=False, description="Billing month, YYYY-MM (required "
                            "without interval; with it, instead of since/until)."),
            OpenApiParameter(
                "currency", OpenApiTypes.STR, pattern=CURRENCY_PATTERN,
                description="ISO 4217; default reporting currency",
            ),
            OpenApiParameter(
                "group_by", OpenApiTypes.STR, pattern=GROUP_BY_PATTERN,
                description="team, provider, category (default team), account, service, "
                "region, instance_type or tag:KEY. Region, instance type and tags read the bill "
                "(finance only; not with team or category).",
            ),
            team_parameter(description="team slug: its cost only"),
            OpenApiParameter("interval", OpenApiTypes.STR, enum=list(INTERVALS),
                             description="Answer as flat points, one per bucket and key."),
            OpenApiParameter("since", OpenApiTypes.DATE, description="With interval: first day."),
            OpenApiParameter("until", OpenApiTypes.DATE,
                             description="With interval: last day (default today)."),
            OpenApiParameter(
                "cost", OpenApiTypes.STR, enum=list(COST_MEASURES),
                description="amortised (EffectiveCost, the default, as attribution splits it) "
                "or invoiced (BilledCost, from the bill: finance only, not per team).",
            ),
            *[
                OpenApiParameter(name, OpenApiTypes.STR, description=f"Only this {label.lower()}.")
                for name, label in DIMENSION_FILTERS
                if name not in ("team", "category")
            ],
            OpenApiParameter("category", OpenApiTypes.STR, enum=list(Category.values),
                             description="Only this ledger category."),
            OpenApiParameter("tag", OpenApiTypes.STR, pattern=TAG_FILTER_PATTERN,
                             description="KEY=VALUE: only line items with this tag (the bill)."),
        ],
        responses=PolymorphicProxySerializer(
            component_name="CostsResponse",
            serializers=[CostSeriesReportSerializer, CostPointSerializer(many=True)],
            resource_type_field_name=None,
            many=False,
        ),
    )  # fmt: skip
    @cached_read
    def get(self, request: Request) -> Response:
        query = CostsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        filterset = CostExplorerFilterSet(request.query_params)
        if not filterset.is_valid():
            raise ValidationError(filterset.errors)
        explorer = filterset.explorer_query()
        user = request.user
        teams = team_list_visible(user=user)
        team = params.get("team")
        scope: dict[str, Any] = {
            "teams": teams.filter(slug=team) if team else teams,
            "include_unowned": user_is_finance(user) and not team,
            "currency": params.get("currency") or settings.FINOPS_REPORTING_CURRENCY,
        }
        month = month_parse(params["month"]) if "month" in params else None
        plain = explorer.is_plain() or (
            explorer.group_by in COST_GROUP_BY
            and explorer.filters == (("team", team),)
            and explorer.tag is None
            and explorer.cost == AMORTISED
        )
        try:
            if "interval" in params:
                span = {"month": month, "since": params.get("since"), "until": params.get("until")}
                if plain:
                    points = cost_points(
                        **scope, group_by=params["group_by"], interval=params["interval"], **span
                    )
                else:
                    points = explorer_points(explorer, **scope, interval=params["interval"], **span)
                # Plain dicts: CostPointSerializer's body (the schema's), at a fraction of its CPU.
                return Response(cost_point_bodies(points, params["group_by"]))
            assert month is not None  # the query serializer requires it without interval
            if plain:
                report = cost_series(month=month, **scope, group_by=params["group_by"])
            else:
                report = explorer_series(explorer, month=month, **scope)
        except FxRateMissing as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except ExplorerError as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(CostSeriesReportSerializer(report).data)

    def csv_rows(self, data: dict[str, Any] | list[Any]) -> list[Any]:
        """?format=csv: one row per series and day (the page's daily tables, long form); with
        `interval`, the flat points themselves (a list: it was wrapped in one row, a 500)."""
        if isinstance(data, list):
            return data
        if "series" not in data:
            return [data]
        return [
            {
                "day": p["day"],
                data["group_by"]: s["key"] or "",
                "name": s["name"],
                "currency": data["currency"],
                "amount": p["amount"],
            }
            for s in data["series"]
            for p in s["points"]
        ]


class ImportBatchViewSet(viewsets.ReadOnlyModelViewSet[ImportBatch]):
    """Import batches, newest first (finance only)."""

    serializer_class = ImportBatchSerializer
    permission_classes = [IsAuthenticated, IsFinance]
    queryset = ImportBatch.objects.order_by("-created_at", "-id")
    filterset_fields = ["kind", "status", "source"]


class EndpointsView(APIView):
    """Inference endpoints of a month, one row per endpoint, team and billing currency: cost,
    usage, unit costs. An endpoint's cost is split by the team owning each pod; a team lead
    gets their teams' rows only, and node_cost, node_idle_cost and idle_share (which include
    other teams' cost on the serving nodes) are null for them. Rows of no team: finance only."""

    @extend_schema(
        parameters=[
            month_parameter(required=True),
            team_parameter(),
        ],
        responses=EndpointMonthSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        query = EndpointsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = month_parse(query.validated_data["month"])
        finance = user_is_finance(request.user)
        totals = endpoint_month_totals(
            month=month,
            teams=team_list_visible(user=request.user),
            include_unowned=finance,
            team_slug=query.validated_data.get("team"),
            capacity=finance,
        )
        rows = [
            {
                "endpoint": t.endpoint,
                "team": t.team.slug if t.team else None,
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
            for t in totals
        ]
        return Response(EndpointMonthSerializer(rows, many=True).data)
