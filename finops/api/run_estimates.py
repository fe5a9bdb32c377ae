"""`POST /api/v1/run-estimates/`: plan a training run before booking it (issue 30).

The body names the model (parameters, tokens to train, optionally FLOPs per token), the GPU
(model, count, precision) and optionally the MFU; without one, the team's median measured MFU
on that GPU (else the organisation's) is used and the answer says how many runs it comes from.
The answer: GPU-hours, wall time, and the cost of every priced way to buy them (on demand, spot
with its expected rework, each reserved term, on premises), cheapest first, each an estimate
with its source and the assumptions beside it. With `save_for_run` (and `team`) the plan is
kept for that run, whose page then shows the plan against what the run did.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from finops.api.fields import AsciiDecimalField, StrictCharField, StrictIntegerField
from finops.api.schema import SLUG_PATTERN
from finops.org.models import Team
from finops.org.permissions import user_is_finance
from finops.org.selectors import team_list_visible
from finops.run_metrics.peaks import PEAKS
from finops.run_metrics.plan_inputs import PlanError, PlannedRun, run_plan
from finops.run_metrics.planner import PlanOption
from finops.run_metrics.services import run_plan_save

DTYPES = sorted({dtype for _, dtype in PEAKS})
# 0.01 to 1 with at most 6 places, as the field checks (the schema's pattern says the bounds).
MFU_PATTERN = r"^(1(\.0{1,6})?|0\.(0[1-9][0-9]{0,4}|[1-9][0-9]{0,5}))$"
_MAX_COUNT = 10**15


class RunEstimateRequestSerializer(serializers.Serializer[Any]):
    model_params = StrictIntegerField(min_value=1, max_value=10**14, help_text="parameters")
    tokens = StrictIntegerField(min_value=1, max_value=_MAX_COUNT, help_text="tokens to train")
    gpu_model = StrictCharField(max_length=100, help_text="e.g. H100, A100, H200, B200, L40S")
    gpu_count = StrictIntegerField(min_value=1, max_value=100_000)
    dtype = serializers.ChoiceField(choices=DTYPES, default="bf16")
    mfu = AsciiDecimalField(
        max_digits=7, decimal_places=6, min_value=Decimal("0.01"), max_value=Decimal("1"),
        schema_pattern=MFU_PATTERN, required=False,
        help_text="0.01 to 1; default: the team's median measured MFU on the GPU",
    )  # fmt: skip
    flops_per_token = StrictIntegerField(
        min_value=1, max_value=10**16, required=False, help_text="default: 6 x model_params"
    )
    team = StrictCharField(
        max_length=100, required=False, validators=[RegexValidator(SLUG_PATTERN)],
        help_text="team slug: its measured MFU is the default",
    )  # fmt: skip
    save_for_run = StrictCharField(
        max_length=500, required=False,
        help_text="keep this plan for the team's run of this id: its page shows plan against "
        "actual (needs `team`)",
    )  # fmt: skip
    pricing = StrictCharField(
        max_length=32, required=False,
        help_text="the way of buying to keep with the plan (on_demand, spot, 1y_no_upfront, "
        "..., on_prem); default the cheapest",
    )  # fmt: skip

    instance_type = StrictCharField(
        max_length=100, required=False, help_text="with pricing: the option to keep"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "save_for_run" in attrs and "team" not in attrs:
            raise serializers.ValidationError({"team": ["A saved plan needs its team."]})
        return attrs


class PlanOptionSerializer(serializers.Serializer[PlanOption]):
    provider = serializers.CharField()
    instance_type = serializers.CharField()
    region = serializers.CharField()
    pricing = serializers.CharField(help_text="on_demand, spot, 1y_no_upfront, ..., on_prem")
    currency = serializers.CharField()
    instances = serializers.IntegerField()
    instance_hours = serializers.DecimalField(max_digits=30, decimal_places=2)
    gpu_hours = serializers.DecimalField(max_digits=30, decimal_places=2)
    wall_hours = serializers.DecimalField(max_digits=30, decimal_places=2)
    cost = serializers.DecimalField(max_digits=30, decimal_places=2, help_text="an estimate")
    expected_interruptions = serializers.DecimalField(max_digits=30, decimal_places=4)
    rework_gpu_hours = serializers.DecimalField(max_digits=30, decimal_places=4)
    price_source = serializers.CharField(source="source", help_text="where the price came from")


class MeasuredMfuSerializer(serializers.Serializer[Any]):
    mfu = serializers.DecimalField(max_digits=10, decimal_places=6)
    runs = serializers.IntegerField()
    scope = serializers.ChoiceField(choices=["team", "organisation"])
    run_ids = serializers.ListField(child=serializers.CharField())


class RunEstimateSerializer(serializers.Serializer[Any]):
    estimated = serializers.BooleanField(help_text="always true: every figure is an estimate")
    gpu_model = serializers.CharField()
    gpu_count = serializers.IntegerField()
    dtype = serializers.CharField()
    mfu = serializers.DecimalField(max_digits=10, decimal_places=6)
    mfu_basis = serializers.CharField()
    measured_mfu = MeasuredMfuSerializer(allow_null=True)
    peak_flops_per_gpu = serializers.DecimalField(max_digits=30, decimal_places=0)
    peak_source = serializers.CharField()
    work_flops = serializers.DecimalField(max_digits=40, decimal_places=0)
    gpu_hours = serializers.DecimalField(max_digits=30, decimal_places=2)
    wall_hours = serializers.DecimalField(max_digits=30, decimal_places=2)
    options = PlanOptionSerializer(many=True)
    assumptions = serializers.ListField(child=serializers.CharField())
    saved_plan_id = serializers.IntegerField(allow_null=True, help_text="when save_for_run")


def run_plan_body(plan: PlannedRun, *, show_run_ids: bool) -> dict[str, Any]:
    measured = plan.measured
    return {
        "estimated": True,
        "gpu_model": plan.request.gpu_model,
        "gpu_count": plan.request.gpu_count,
        "dtype": plan.dtype,
        "mfu": plan.request.mfu,
        "mfu_basis": plan.mfu_basis,
        "measured_mfu": None
        if measured is None
        else {
            "mfu": measured.mfu,
            "runs": measured.runs,
            "scope": measured.scope,
            # Another team's run names are not a lead's to see: the organisation's median
            # shows its count alone.
            "run_ids": list(measured.run_ids) if show_run_ids or measured.scope == "team" else [],
        },
        "peak_flops_per_gpu": plan.request.peak_flops_per_gpu,
        "peak_source": plan.peak_source,
        "work_flops": plan.estimate.work_flops,
        "gpu_hours": plan.estimate.gpu_hours,
        "wall_hours": plan.estimate.wall_hours,
        "options": plan.estimate.options,
        "assumptions": plan.assumptions,
    }


class RunEstimateView(APIView):
    """Plan a run: GPU-hours, wall time and the cost of every priced way to buy them; with
    `save_for_run`, keep the plan for that run of `team` (its page compares plan and actual)."""

    @extend_schema(request=RunEstimateRequestSerializer, responses=RunEstimateSerializer)
    def post(self, request: Request) -> Response:
        body = RunEstimateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        team: Team | None = None
        if "team" in data:
            team = team_list_visible(user=request.user).filter(slug=data["team"]).first()
            if team is None:
                raise NotFound("no such team")
        try:
            plan = run_plan(
                team=team,
                model_params=data["model_params"],
                tokens=data["tokens"],
                gpu_model=data["gpu_model"],
                gpu_count=data["gpu_count"],
                dtype=data["dtype"],
                mfu=data.get("mfu"),
                flops_per_token=data.get("flops_per_token"),
            )
        except PlanError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        body_out = run_plan_body(plan, show_run_ids=user_is_finance(request.user))
        body_out["saved_plan_id"] = None
        if team is not None and data.get("save_for_run"):
            try:
                saved = run_plan_save(
                    team=team, run_id=data["save_for_run"], plan=plan,
                    created_by=request.user.get_username(), pricing=data.get("pricing", ""),
                    instance_type=data.get("instance_type", ""),
                )  # fmt: skip
            except ValueError as exc:
                return Response({"pricing": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
            body_out["saved_plan_id"] = saved.pk
        return Response(RunEstimateSerializer(body_out).data)
