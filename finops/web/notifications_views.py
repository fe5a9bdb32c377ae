"""/account/notifications/: which emails the signed-in user wants (anomalies one by one, as a
daily digest or none; budget alerts or none)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from finops.notifications.selectors import notification_preference_get
from finops.notifications.services import notification_preference_set
from finops.org.permissions import own_account_write
from finops.web.notifications_forms import NotificationPreferenceForm


@own_account_write  # anyone signed in, a viewer too, chooses their own emails
@login_required
@require_http_methods(["GET", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    current = notification_preference_get(user=request.user)
    if request.method == "POST":
        form = NotificationPreferenceForm(request.POST)
        if form.is_valid():
            notification_preference_set(
                user=request.user,
                anomaly_mode=form.cleaned_data["anomaly_mode"],
                budget_emails=form.cleaned_data["budget_emails"],
            )
            messages.success(request, "Your email settings are saved.")
            return redirect("notifications:preferences")
    else:
        form = NotificationPreferenceForm(
            initial={"anomaly_mode": current.anomaly_mode, "budget_emails": current.budget_emails}
        )
    context = {"form": form, "preference": current}
    return render(request, "notifications/preferences.html", context)
