"""The run planner page (issue 30): the form of `POST /api/v1/run-estimates/`, answered on the
page. A GET form: planning reads and stores nothing, so a plan is a link a lead can share."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from finops.org.models import Team
from finops.org.selectors import team_list_visible
from finops.run_metrics.peaks import PEAKS
from finops.run_metrics.plan_inputs import PlanError, RunPlan, run_plan

GPU_MODELS = sorted({gpu for gpu, _ in PEAKS})
DTYPES = sorted({dtype for _, dtype in PEAKS})


class RunPlanForm(forms.Form):
    team = forms.ModelChoiceField(
        queryset=Team.objects.none(), required=False, to_field_name="slug",
        empty_label="(organisation)", help_text="its measured MFU is the default",
    )  # fmt: skip
    model_params = forms.IntegerField(
        min_value=1, max_value=10**14, label="Model parameters", initial=7_000_000_000
    )
    tokens = forms.IntegerField(
        min_value=1, max_value=10**15, label="Tokens to train", initial=1_000_000_000_000
    )
    gpu_model = forms.ChoiceField(
        choices=[(g, g) for g in GPU_MODELS], initial="H100", label="GPU model"
    )
    gpu_count = forms.IntegerField(min_value=1, max_value=100_000, initial=64, label="GPUs")
    dtype = forms.ChoiceField(choices=[(d, d) for d in DTYPES], initial="bf16", label="Precision")
    mfu = forms.DecimalField(
        min_value=Decimal("0.01"), max_value=Decimal(1), max_digits=7, decimal_places=6,
        required=False, label="MFU (0-1)", help_text="empty: the team's measured median",
    )  # fmt: skip

    def __init__(self, *args: object, teams: object = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]


@login_required
def run_planner(request: HttpRequest) -> HttpResponse:
    teams = team_list_visible(user=request.user).order_by("name")
    form = RunPlanForm(request.GET or None, teams=teams)
    plan: RunPlan | None = None
    error = ""
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:
            plan = run_plan(
                team=data["team"],
                model_params=data["model_params"],
                tokens=data["tokens"],
                gpu_model=data["gpu_model"],
                gpu_count=data["gpu_count"],
                dtype=data["dtype"],
                mfu=data["mfu"],
                flops_per_token=None,
            )
        except PlanError as exc:
            error = str(exc)
    cheapest = plan.estimate.options[0] if plan and plan.estimate.options else None
    context = {"form": form, "plan": plan, "error": error, "cheapest": cheapest}
    return render(request, "web/run_plan.html", context, status=400 if error else 200)
