"""Pages of chargeback: a team's statement (page, CSV, PDF), the Close page, the audit log.
Thin: check access, parse the month, call one selector or service, render."""

from __future__ import annotations

from datetime import date

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from finops.audit.selectors import audit_event_list
from finops.chargeback import documents
from finops.chargeback.checks import checks_status, period_checks
from finops.chargeback.period_selectors import closes_active, period_list
from finops.chargeback.recipients import statement_recipients
from finops.chargeback.selectors import statement_get
from finops.chargeback.services import PeriodError, period_close, period_reopen
from finops.core.months import month_format, month_parse
from finops.core.wording import counted
from finops.org.permissions import user_may_edit
from finops.org.selectors import team_list_visible
from finops.web.access import require_finance


def _month(text: str) -> date:
    try:
        return month_parse(text)
    except ValueError as exc:
        raise Http404("Months are YYYY-MM.") from exc


@login_required
def statement(request: HttpRequest, slug: str, month: str) -> HttpResponse:
    team = get_object_or_404(team_list_visible(user=request.user), slug=slug)
    data = statement_get(team=team, month=_month(month))
    context = {"statement": data, "team": team, "month": data.month}
    return render(request, "web/statement.html", context)


@login_required
def statement_file(request: HttpRequest, slug: str, month: str, extension: str) -> HttpResponse:
    """The statement as an attachment: .csv or .pdf, from the same Statement."""
    if extension not in documents.CONTENT_TYPES:
        raise Http404("Statements are .csv or .pdf.")
    team = get_object_or_404(team_list_visible(user=request.user), slug=slug)
    data = statement_get(team=team, month=_month(month))
    return documents.statement_response(data, extension=extension)


@login_required
def close_periods(request: HttpRequest) -> HttpResponse:
    """Months with their status; finance closes and reopens them here (viewers only look)."""
    require_finance(request)
    context = {
        "periods": period_list(),
        "may_edit": user_may_edit(request.user),
        # Each month's statements, one link per team: what finance checks before closing.
        "teams": team_list_visible(user=request.user).order_by("name"),
    }
    return render(request, "web/close.html", context)


@login_required
def close_review(request: HttpRequest, month: str) -> HttpResponse:
    """One month before (and after) its close: the checklist, who gets a statement email and
    who does not, and the close form, which asks for confirmation."""
    require_finance(request)
    when = _month(month)
    close = closes_active().get(when)
    checks = period_checks(month=when)
    recipients = statement_recipients(month=when, close=close)
    context = {
        "month": when,
        "close": close,
        "checks": checks,
        "checks_status": checks_status(checks),
        "recipients": recipients,
        "with_email": [r for r in recipients if r.gets_email],
        "without_email": [r for r in recipients if not r.gets_email],
        "may_edit": user_may_edit(request.user),
    }
    return render(request, "web/close_review.html", context)


@login_required
@require_POST
def close_action(request: HttpRequest, month: str, action: str) -> HttpResponse:
    if not user_may_edit(request.user):
        raise PermissionDenied("Only finance may close or reopen a month.")
    when = _month(month)
    reason = request.POST.get("reason", "").strip()
    review = reverse("web:close-review", args=[month_format(when)])
    try:
        if action == "close":
            if request.POST.get("confirm") != "yes":
                messages.error(
                    request,
                    f"{when:%B %Y} is not closed: tick the confirmation after reviewing the "
                    "checklist.",
                )
                return redirect(review)
            close = period_close(month=when, actor=request.user, reason=reason)
            sent = [r for r in statement_recipients(month=when, close=close) if r.gets_email]
            messages.success(
                request,
                f"{when:%B %Y} is closed; {counted(len(sent), 'statement email')} queued in the "
                "outbox "
                "(the list below says who got one and who did not).",
            )
            return redirect(review)
        if action == "reopen":
            period_reopen(month=when, actor=request.user, reason=reason)
            messages.success(request, f"{when:%B %Y} is open again.")
        else:
            raise Http404("No such action.")
    except PeriodError as exc:
        messages.error(request, str(exc))
        if action == "close":
            return redirect(review)
    return redirect(reverse("web:close"))


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    require_finance(request)
    prefix = request.GET.get("action", "").strip()
    paginator = Paginator(audit_event_list(action_prefix=prefix), 50)
    page = paginator.get_page(request.GET.get("page"))
    return render(request, "web/audit.html", {"page": page, "action": prefix})
