"""The run planner page (issue 30): the form of `POST /api/v1/run-estimates/`, answered on the
page. A GET form: planning reads and stores nothing, so a plan is a link a lead can share."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from finops.org.models import Team
from finops.org.permissions import user_is_viewer
from finops.org.selectors import team_list_visible
from finops.run_metrics.peaks import PEAKS
from finops.run_metrics.plan_inputs import PlanError, PlannedRun, run_plan
from finops.run_metrics.services import run_plan_save

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


def _plan(data: dict[str, Any]) -> PlannedRun:
    return run_plan(
        team=data["team"],
        model_params=data["model_params"],
        tokens=data["tokens"],
        gpu_model=data["gpu_model"],
        gpu_count=data["gpu_count"],
        dtype=data["dtype"],
        mfu=data["mfu"],
        flops_per_token=None,
    )


@login_required
def run_planner(request: HttpRequest) -> HttpResponse:
    teams = team_list_visible(user=request.user).order_by("name")
    form = RunPlanForm(request.GET or None, teams=teams)
    plan: PlannedRun | None = None
    error = ""
    if form.is_bound and form.is_valid():
        try:
            plan = _plan(form.cleaned_data)
        except PlanError as exc:
            error = str(exc)
    cheapest = plan.estimate.options[0] if plan and plan.estimate.options else None
    context = {
        "form": form, "plan": plan, "error": error, "cheapest": cheapest,
        "may_keep": plan is not None and form.cleaned_data.get("team") is not None
        and not user_is_viewer(request.user),
    }  # fmt: skip
    return render(request, "web/run_plan.html", context, status=400 if error else 200)


@require_POST
@login_required
def run_plan_keep(request: HttpRequest) -> HttpResponse:
    """Keep the plan of the form's figures for a run of the team (its page compares it with what
    the run did once it has run)."""
    teams = team_list_visible(user=request.user).order_by("name")
    form = RunPlanForm(request.POST, teams=teams)
    run_id = request.POST.get("run_id", "").strip()
    if not form.is_valid() or form.cleaned_data["team"] is None or not run_id:
        raise BadRequest("A plan is kept for a team's run: give the team and the run id.")
    data = form.cleaned_data
    pricing, _, instance_type = request.POST.get("choice", "").partition("|")
    try:
        plan = _plan(data)
        saved = run_plan_save(
            team=data["team"], run_id=run_id[:500], plan=plan,
            created_by=request.user.get_username(), pricing=pricing, instance_type=instance_type,
        )  # fmt: skip
    except (PlanError, ValueError) as exc:
        raise BadRequest(str(exc)) from exc
    messages.success(
        request,
        f"Plan kept for run {saved.run_id} of {saved.team.name}: {saved.gpu_hours} GPU-hours, "
        f"{saved.cost:,.2f} {saved.currency} (estimate). Its run page compares it with the run.",
    )
    query = {k: v for k, v in request.POST.items() if k in form.fields}
    return redirect(f"{reverse('web:run-plan')}?{urlencode(query)}")
