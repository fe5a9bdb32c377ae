"""Budget pages: the list (sortable, with bars), a budget (burn-down chart, alerts, drivers),
create and edit forms, opt-out. Thin: check access, call selectors or one service, render."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from finops.budgets.drivers import budget_drivers
from finops.budgets.models import Budget, BudgetOptOut
from finops.budgets.periods import as_of_parse
from finops.budgets.recipients import budget_no_recipient_warning, budget_recipient_list
from finops.budgets.selectors import (
    BudgetStatus,
    budget_alert_history,
    budget_list_visible,
    budget_status,
    budget_statuses,
)
from finops.budgets.series import last_ledger_day
from finops.budgets.services import budget_create, budget_delete, budget_opt_out_set, budget_update
from finops.org.permissions import own_account_write, user_is_finance
from finops.org.selectors import team_list_visible
from finops.web.budgets_forms import BudgetForm

SORTS = {
    "name": lambda s: (s.budget.name.lower(),),
    "scope": lambda s: (s.budget.scope_label.lower(),),
    "period": lambda s: (s.budget.period, s.budget.name.lower()),
    "amount": lambda s: (s.budget.amount,),
    "actual": lambda s: (s.actual,),
    "forecast": lambda s: (s.forecast,),
    "percent": lambda s: (s.percent_used,),
}


def default_as_of() -> date:
    """Today, or the newest ledger day when the ledger stops before today (a demo month)."""
    today = timezone.now().date()
    newest = last_ledger_day()
    return min(today, newest) if newest else today


def _as_of(request: HttpRequest) -> date:
    raw = request.GET.get("as_of", "").strip()
    if not raw:
        return default_as_of()
    try:
        return as_of_parse(raw)
    except ValueError as exc:
        raise BadRequest(f"as_of: {exc}") from exc


def _urgency(s: BudgetStatus) -> tuple[int, Decimal]:
    """Over first, then forecast to go over, then the rest; each by % used, highest first."""
    rank = 0 if s.over else 1 if s.forecast_over else 2
    return rank, -s.percent_used


def sorted_statuses(statuses: list[BudgetStatus], sort: str) -> list[BudgetStatus]:
    key = sort.lstrip("-")
    if key not in SORTS:
        return sorted(statuses, key=_urgency)
    return sorted(statuses, key=SORTS[key], reverse=sort.startswith("-"))


@login_required
def budget_list(request: HttpRequest) -> HttpResponse:
    as_of = _as_of(request)
    sort = request.GET.get("sort", "")
    statuses = budget_statuses(budgets=list(budget_list_visible(user=request.user)), as_of=as_of)
    context = {
        "as_of": as_of,
        "sort": sort,
        "statuses": sorted_statuses(statuses, sort),
        "columns": [
            ("name", "Budget"),
            ("scope", "Scope"),
            ("period", "Period"),
            ("amount", "Amount"),
            ("actual", "Actual"),
            ("forecast", "Forecast"),
            ("percent", "% used"),
        ],
    }
    return render(request, "budgets/list.html", context)


def _visible_budget(request: HttpRequest, pk: int) -> Budget:
    # Another team's budget is indistinguishable from one that does not exist.
    return get_object_or_404(budget_list_visible(user=request.user), pk=pk)


@login_required
def budget_detail(request: HttpRequest, pk: int) -> HttpResponse:
    budget = _visible_budget(request, pk)
    as_of = _as_of(request)
    status = budget_status(budget=budget, as_of=as_of)
    thresholds = [(t, budget.amount * t / 100) for t in budget.thresholds]
    recipients = budget_recipient_list(budget=budget)
    context = {
        "budget": budget,
        "status": status,
        "as_of": as_of,
        "thresholds": thresholds,
        "alerts": budget_alert_history(budget=budget),
        "drivers": budget_drivers(budget=budget, period=status.period, as_of=as_of),
        "recipients": recipients,
        "no_recipient": budget_no_recipient_warning(budget=budget, receiving=recipients.receiving),
        "opted_out": BudgetOptOut.objects.filter(
            budget=budget, user_id=request.user.pk or 0
        ).exists(),
    }
    return render(request, "budgets/detail.html", context)


def _form_page(request: HttpRequest, budget: Budget | None) -> HttpResponse:
    finance = user_is_finance(request.user)
    teams = list(team_list_visible(user=request.user).order_by("name"))
    if not finance and not teams:
        raise PermissionDenied("You lead no team.")
    if request.method == "POST":
        form = BudgetForm(request.POST, teams=teams, finance=finance)
        form.is_valid()
        try:
            data = form.service_data()
            if budget is None:
                budget = budget_create(user=request.user, data=data)
            else:
                budget = budget_update(user=request.user, budget=budget, data=data)
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            return HttpResponseRedirect(reverse("budgets:detail", args=[budget.pk]))
    else:
        initial: dict[str, Any] = (
            BudgetForm.initial_for(budget)
            if budget
            else {
                "thresholds": "50, 80, 100",
                "forecast_thresholds": "100",
                "active": True,
                "currency": "USD",
                "period": Budget.Period.MONTH,
            }
        )
        form = BudgetForm(initial=initial, teams=teams, finance=finance)
    no_recipient = ""
    if budget is not None:
        receiving = budget_recipient_list(budget=budget).receiving
        no_recipient = budget_no_recipient_warning(budget=budget, receiving=receiving)
    context = {"form": form, "budget": budget, "no_recipient": no_recipient}
    return render(request, "budgets/form.html", context)


@login_required
def budget_new(request: HttpRequest) -> HttpResponse:
    return _form_page(request, None)


@login_required
def budget_edit(request: HttpRequest, pk: int) -> HttpResponse:
    return _form_page(request, _visible_budget(request, pk))


@own_account_write  # the user's own emails: a viewer may stop them too
@login_required
@require_POST
def budget_opt_out(request: HttpRequest, pk: int) -> HttpResponse:
    budget = _visible_budget(request, pk)
    budget_opt_out_set(budget=budget, user=request.user, opted_out=request.POST.get("stop") == "1")
    return HttpResponseRedirect(reverse("budgets:detail", args=[budget.pk]))


@login_required
@require_POST
def budget_remove(request: HttpRequest, pk: int) -> HttpResponse:
    budget_delete(user=request.user, budget=_visible_budget(request, pk))
    return HttpResponseRedirect(reverse("budgets:list"))
