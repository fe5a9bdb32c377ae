"""Anomaly pages: the list with filters, and one anomaly with its chart, drivers and workflow."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from finops.anomalies.models import Anomaly
from finops.anomalies.selectors import (
    anomaly_list_filtered,
    anomaly_list_visible,
    anomaly_rate_figures,
    anomaly_share_figures,
)
from finops.anomalies.services import TRANSITIONS, AnomalyTransitionError, anomaly_status_change
from finops.org.selectors import team_list_visible


class AnomalyFilterForm(forms.Form):
    team = forms.CharField(required=False)
    status = forms.ChoiceField(
        required=False,
        choices=[("", "Any"), ("open", "Open (new or acknowledged)"), *Anomaly.Status.choices],
    )
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    severity = forms.ChoiceField(required=False, choices=[("", "Any"), *Anomaly.Severity.choices])
    min_impact = forms.DecimalField(required=False, min_value=Decimal(0), label="Impact at least")


class StatusForm(forms.Form):
    status = forms.ChoiceField(choices=Anomaly.Status.choices)
    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=True)


@login_required
def anomaly_list(request: HttpRequest) -> HttpResponse:
    form = AnomalyFilterForm(request.GET or None)
    queryset = anomaly_list_visible(user=request.user)
    if form.is_valid():
        queryset = anomaly_list_filtered(queryset, **form.cleaned_data)
    paginator = Paginator(queryset.order_by("-first_day", "-id"), 50)
    context = {
        "form": form,
        "page": paginator.get_page(request.GET.get("page")),
        "teams": team_list_visible(user=request.user),
        "query": request.GET.copy().urlencode() if request.GET else "",
    }
    return render(request, "anomalies/list.html", context)


def _can_change(user: Any, anomaly: Anomaly) -> bool:
    # Whoever may see an anomaly is finance or a lead of its team: both may act on it.
    return anomaly_list_visible(user=user).filter(pk=anomaly.pk).exists()


@login_required
def anomaly_detail(request: HttpRequest, pk: int) -> HttpResponse:
    anomaly = get_object_or_404(anomaly_list_visible(user=request.user), pk=pk)
    form = StatusForm(initial={"status": ""})
    if request.method == "POST":
        if not _can_change(request.user, anomaly):
            raise PermissionDenied
        form = StatusForm(request.POST)
        if form.is_valid():
            try:
                anomaly_status_change(
                    anomaly_id=anomaly.pk, status=form.cleaned_data["status"],
                    comment=form.cleaned_data["comment"], user=request.user,
                )  # fmt: skip
            except AnomalyTransitionError as exc:
                form.add_error("status", str(exc))
            else:
                return redirect("web:anomaly", pk=anomaly.pk)
    allowed = TRANSITIONS.get(anomaly.status, frozenset())
    status_field = form.fields["status"]
    assert isinstance(status_field, forms.ChoiceField)
    status_field.choices = [c for c in Anomaly.Status.choices if c[0] in allowed]
    context = {
        "anomaly": anomaly,
        "breakdowns": anomaly.driver_breakdowns(),
        "changes": list(anomaly.status_changes.select_related("user")),
        "chart": [_chart_row(row, anomaly) for row in anomaly.chart],
        "chart_unit": _chart_unit(anomaly),
        # An endpoint's series is cost per 1,000 requests: its cards say the same.
        "rates": anomaly_rate_figures(anomaly=anomaly),
        # A cluster's series is its idle share: the cards give the share, the money apart.
        "shares": anomaly_share_figures(anomaly=anomaly),
        "form": form,
    }
    return render(request, "anomalies/detail.html", context)


def _chart_row(row: dict[str, str], anomaly: Anomaly) -> dict[str, Any]:
    day = dt.date.fromisoformat(row["day"])
    in_event = anomaly.first_day <= day <= anomaly.last_day

    def raw(key: str) -> Decimal | None:
        try:
            return Decimal(row[key]) if row.get(key) else None
        except InvalidOperation:
            return None

    # A share (0..1) is charted in percent, as its cards give it.
    scale = Decimal(100) if anomaly.series_kind == Anomaly.Series.CLUSTER_IDLE else Decimal(1)

    def number(key: str) -> Decimal | None:
        value = raw(key)
        if value is None or scale == 1:
            return value
        return (value * scale).quantize(Decimal("0.01"))

    actual = number("actual")
    return {"day": day, "actual": actual, "expected": number("expected"),
            "low": number("low"), "high": number("high"),
            "event": actual if in_event else None, "in_event": in_event}  # fmt: skip


def _chart_unit(anomaly: Anomaly) -> str:
    if anomaly.series_kind == Anomaly.Series.CLUSTER_IDLE:
        return "idle share, % of the cluster's GPU node cost"
    return anomaly.unit
