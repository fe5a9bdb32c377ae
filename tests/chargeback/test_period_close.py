"""Period close: finance closes a month (its statements frozen and emailed to the leads once);
a bill restated afterwards leaves the closed statement alone and shows up, with its reason, as
an adjustment in the next open month; reopening needs a reason; the audit log has it all."""

from __future__ import annotations

import datetime as dt
import email
import io
from decimal import Decimal
from email import policy
from email.message import EmailMessage
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks

from finops.audit.models import AuditEvent
from finops.chargeback.models import ClosedPeriod
from finops.chargeback.selectors import statement_get, statements_build
from finops.chargeback.services import PeriodError, period_close, period_reopen
from finops.core.months import month_format
from finops.notifications.models import EmailNotification
from finops.notifications.tasks import resend_unsent_notifications
from finops.org.models import MappingRule, Team
from tests.close_data import ingest, write_focus
from tests.smtp import CapturedMail

pytestmark = pytest.mark.django_db

SEPT = dt.date(2025, 9, 1)
OCT = dt.date(2025, 10, 1)
NOV = dt.date(2025, 11, 1)


@pytest.fixture
def lead_with_email(lead_user: User) -> User:
    lead_user.email = "vision-lead@example.com"
    lead_user.save()
    return lead_user


def _total(team: Team, month: dt.date) -> dict[str, Decimal]:
    return {n.currency: n.amount for n in statement_get(team=team, month=month).total_native}


def _close(
    month: dt.date,
    actor: User,
    capture: DjangoCaptureOnCommitCallbacks,
    reason: str = "",
) -> ClosedPeriod:
    with capture(execute=True):
        return period_close(month=month, actor=actor, reason=reason)


def _mails_to(smtp_server: CapturedMail, address: str) -> list[EmailMessage]:
    return [email.message_from_bytes(raw, policy=policy.default) for raw in smtp_server.to(address)]


def test_close_freezes_and_restatement_becomes_next_month_adjustment(
    bills: Path,
    team: Team,
    finance_user: User,
    lead_with_email: User,
    smtp_server: CapturedMail,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    assert _total(team, SEPT) == {"USD": Decimal("100")}
    close = _close(SEPT, finance_user, django_capture_on_commit_callbacks, reason="books done")
    frozen = statement_get(team=team, month=SEPT)
    assert frozen.status == "closed"
    assert frozen.close == close

    # The lead got September's statement once, with links to it.
    [mail] = _mails_to(smtp_server, "vision-lead@example.com")
    assert mail["Subject"].strip() == "Chargeback statement Vision · September 2025 (closed)"
    plain = mail.get_body(preferencelist=("plain",))
    assert plain is not None
    body = plain.get_content()
    assert "100.00 USD" in body
    assert "/teams/vision/statements/2025-09.pdf" in body

    # AWS restates September: r1 is 112.50 now (the import re-attributes September).
    ingest(write_focus(bills / "sept-v2.csv", "2025-09", [("r1", "vision", "112.50"),
                                                         ("r2", "speech", "50.00")]))  # fmt: skip
    assert statement_get(team=team, month=SEPT).categories == frozen.categories
    assert _total(team, SEPT) == {"USD": Decimal("100")}

    october = statement_get(team=team, month=OCT)
    assert october.status == "open"
    [adjustment] = october.adjustments
    assert adjustment.origin_month == SEPT
    assert adjustment.key == "tagged"
    assert (adjustment.amount, adjustment.currency) == (Decimal("12.50"), "USD")
    assert adjustment.reporting_amount == Decimal("12.50")
    assert "Restated bill for September 2025" in adjustment.reason
    assert "bill" in adjustment.reason
    # October charges its own ledger plus the adjustment.
    assert _total(team, OCT) == {"USD": Decimal("52.50")}
    assert {n.currency: n.amount for n in october.ledger_native} == {"USD": Decimal("40")}

    # Closing October freezes the adjustment there; it is not carried on to November.
    _close(OCT, finance_user, django_capture_on_commit_callbacks)
    assert statement_get(team=team, month=OCT).adjustments[0].amount == Decimal("12.50")
    assert statements_build(month=NOV) == []
    subjects = [m["Subject"].strip() for m in _mails_to(smtp_server, "vision-lead@example.com")]
    assert subjects == [
        "Chargeback statement Vision · September 2025 (closed)",
        "Chargeback statement Vision · October 2025 (closed)",
    ]


def test_a_second_restatement_adjusts_only_the_new_difference(
    bills: Path,
    team: Team,
    finance_user: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    _close(SEPT, finance_user, django_capture_on_commit_callbacks)
    ingest(write_focus(bills / "v2.csv", "2025-09", [("r1", "vision", "112.50")]))
    _close(OCT, finance_user, django_capture_on_commit_callbacks)
    # Restated again after October closed: 112.50 -> 110. November gets -2.50 only.
    ingest(write_focus(bills / "v3.csv", "2025-09", [("r1", "vision", "110.00")]))
    [november] = statements_build(month=NOV)
    assert [(a.origin_month, a.amount) for a in november.adjustments] == [(SEPT, Decimal("-2.50"))]


def test_emails_go_once_per_close(
    bills: Path,
    team: Team,
    finance_user: User,
    lead_with_email: User,
    smtp_server: CapturedMail,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    close = _close(SEPT, finance_user, django_capture_on_commit_callbacks)
    with pytest.raises(PeriodError, match="already closed"):
        period_close(month=SEPT, actor=finance_user)
    # The outbox's retry finds nothing to send again.
    resend_unsent_notifications()
    assert len(smtp_server.to("vision-lead@example.com")) == 1
    keys = list(EmailNotification.objects.values_list("key", flat=True))
    assert keys == [f"statement:vision:2025-09:{close.pk}"]
    # A lead without an address, and the speech team without a lead, get nothing.
    assert len(smtp_server.messages) == 1


def test_reopen_needs_a_reason_and_makes_the_month_live_again(
    bills: Path,
    team: Team,
    finance_user: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    _close(SEPT, finance_user, django_capture_on_commit_callbacks)
    ingest(write_focus(bills / "v2.csv", "2025-09", [("r1", "vision", "112.50")]))
    with pytest.raises(PeriodError, match="why"):
        period_reopen(month=SEPT, actor=finance_user, reason="  ")
    period_reopen(month=SEPT, actor=finance_user, reason="AWS credit memo")
    assert statement_get(team=team, month=SEPT).status == "open"
    assert _total(team, SEPT) == {"USD": Decimal("112.50")}
    # September is open again, so October carries no adjustment for it.
    assert statement_get(team=team, month=OCT).adjustments == []
    with pytest.raises(PeriodError, match="not closed"):
        period_reopen(month=SEPT, actor=finance_user, reason="again")
    # Closed again: a new close, with the live figures.
    second = _close(SEPT, finance_user, django_capture_on_commit_callbacks)
    assert ClosedPeriod.objects.filter(month=SEPT).count() == 2
    assert statement_get(team=team, month=SEPT).close == second
    assert _total(team, SEPT) == {"USD": Decimal("112.50")}


def test_audit_log_records_closes_and_reopenings(
    bills: Path,
    finance_user: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    close = _close(SEPT, finance_user, django_capture_on_commit_callbacks, reason="month end")
    period_reopen(month=SEPT, actor=finance_user, reason="late credit")
    events = list(AuditEvent.objects.order_by("id"))
    assert [(e.action, e.obj_repr, e.actor_name, e.reason) for e in events] == [
        ("period.close", "2025-09", "fin", "month end"),
        ("period.reopen", "2025-09", "fin", "late credit"),
    ]
    assert events[0].details["close_id"] == close.pk
    assert events[0].details["teams"]["vision"]["native"] == {"USD": "100.000000000000"}


def test_close_page_for_finance_only(
    client: Client,
    bills: Path,
    team: Team,
    finance_user: User,
    lead_user: User,
    viewer_user: User,
) -> None:
    client.force_login(finance_user)
    page = client.get("/close/")
    assert page.status_code == 200
    assert b"September 2025" in page.content
    assert b'data-testid="close-2025-09"' in page.content
    # Each team's statement of the month, one click away from the close button.
    assert f'href="/teams/{team.slug}/statements/2025-09/"'.encode() in page.content
    # Closing asks for confirmation: without it nothing is closed.
    response = client.post("/close/2025-09/close/", {"reason": "done"}, follow=True)
    assert b"tick the confirmation" in response.content
    assert not ClosedPeriod.objects.exists()
    response = client.post(
        "/close/2025-09/close/", {"reason": "done", "confirm": "yes"}, follow=True
    )
    assert b"September 2025 is closed" in response.content
    assert ClosedPeriod.objects.filter(month=SEPT, reopened_at__isnull=True).exists()
    # Reopening without a reason is refused, with the reason why.
    response = client.post("/close/2025-09/reopen/", {"reason": ""}, follow=True)
    assert b"Say why" in response.content
    assert client.get("/audit/").status_code == 200
    assert b"period.close" in client.get("/audit/?action=period.").content

    client.force_login(viewer_user)
    page = client.get("/close/")
    assert page.status_code == 200
    assert b'data-testid="reopen-2025-09"' not in page.content
    assert client.post("/close/2025-09/reopen/", {"reason": "x"}).status_code == 403
    assert client.get("/audit/").status_code == 200

    client.force_login(lead_user)
    assert client.get("/close/").status_code == 403
    assert client.get("/audit/").status_code == 403
    assert client.post("/close/2025-10/close/").status_code == 403
    assert not ClosedPeriod.objects.filter(month=OCT).exists()


def test_rule_changes_in_the_admin_are_audited(
    client: Client, team: Team, finance_user: User
) -> None:
    client.force_login(finance_user)
    response = client.post(
        "/admin/org/mappingrule/add/",
        {"kind": "slurm_account", "key": "", "value": "cv", "team": team.pk, "priority": 50},
    )
    assert response.status_code == 302, response.content[:2000]
    rule = MappingRule.objects.get(value="cv")
    response = client.post(
        f"/admin/org/mappingrule/{rule.pk}/change/",
        {"kind": "slurm_account", "key": "", "value": "cv", "team": team.pk, "priority": 10},
    )
    assert response.status_code == 302
    client.post(f"/admin/org/mappingrule/{rule.pk}/delete/", {"post": "yes"})
    events = list(AuditEvent.objects.order_by("id"))
    assert [(e.action, e.actor_name) for e in events] == [
        ("mapping_rule.add", "fin"),
        ("mapping_rule.change", "fin"),
        ("mapping_rule.delete", "fin"),
    ]
    assert events[1].details["changes"] == {"priority": [50, 10]}


def test_a_month_that_does_not_reconcile_cannot_be_closed(bills: Path, finance_user: User) -> None:
    from finops.attribution.models import AllocatedCost

    # The ledger lost a row: it no longer adds up to the bill (100 + 50 of September).
    AllocatedCost.objects.filter(billing_period=SEPT, team__slug="speech").delete()
    with pytest.raises(PeriodError, match="does not reconcile"):
        period_close(month=SEPT, actor=finance_user)
    assert not ClosedPeriod.objects.exists()
    assert not AuditEvent.objects.exists()


# --- issue 25 item 6: only past months that hold data are closed --------------------------------


def test_a_month_not_over_or_without_data_cannot_be_closed(
    bills: Path, finance_user: User, finance_client: Client
) -> None:
    today = timezone.localdate()
    this_month = today.replace(day=1)
    next_month = (this_month + dt.timedelta(days=32)).replace(day=1)
    with pytest.raises(PeriodError, match="has not happened yet"):
        period_close(month=next_month, actor=finance_user)
    with pytest.raises(PeriodError, match="is not over yet"):
        period_close(month=this_month, actor=finance_user)
    with pytest.raises(PeriodError, match="January 1999 holds no bill and no ledger"):
        period_close(month=dt.date(1999, 1, 1), actor=finance_user)
    # The page says why.
    response = finance_client.post(
        f"/close/{month_format(next_month)}/close/", {"reason": "", "confirm": "yes"}, follow=True
    )
    assert b"has not happened yet" in response.content
    response = finance_client.post(
        "/close/1999-01/close/", {"reason": "", "confirm": "yes"}, follow=True
    )
    assert b"holds no bill and no ledger" in response.content
    assert not ClosedPeriod.objects.exists()
    assert not AuditEvent.objects.exists()
    # A past month with its bill closes as before.
    period_close(month=SEPT, actor=finance_user)


# --- issue 25 item 8: an adjustment says what really moved the closed month --------------------


def _add_rule_in_admin(client: Client, team: Team, value: str) -> None:
    """A tag rule: line items tagged team=<value> go to `team` (audited: the admin's change)."""
    response = client.post(
        "/admin/org/mappingrule/add/",
        {"kind": "tag", "key": "team", "value": value, "team": team.pk, "priority": 1},
    )
    assert response.status_code == 302, response.content[:2000]


def test_a_rule_change_is_not_called_a_restated_bill(
    bills: Path,
    team: Team,
    other_team: Team,
    finance_user: User,
    client: Client,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    # September is closed, restated (r1 100 -> 112.50), and October closed with that
    # restatement booked as its adjustment.
    _close(SEPT, finance_user, django_capture_on_commit_callbacks)
    ingest(write_focus(bills / "v2.csv", "2025-09", [("r1", "vision", "112.50"),
                                                     ("r2", "speech", "50.00")]))  # fmt: skip
    _close(OCT, finance_user, django_capture_on_commit_callbacks)
    [booked] = statement_get(team=team, month=OCT).adjustments
    assert booked.reason.startswith("Restated bill for September 2025 after its close: bill")

    # Then finance moves speech's lines to vision with a mapping rule, and re-attributes.
    client.force_login(finance_user)
    _add_rule_in_admin(client, team, "speech")
    call_command("attribute", "--month", "2025-09", stdout=io.StringIO())

    adjustments = {
        (s.team.slug, a.amount): a.reason
        for s in statements_build(month=NOV)
        for a in s.adjustments
    }
    assert set(adjustments) == {("vision", Decimal("50")), ("speech", Decimal("-50"))}
    for reason in adjustments.values():
        assert "Restated bill" not in reason
        assert reason.startswith("Rule change: mapping rule ")
        assert "added by fin on" in reason
        assert "September 2025 re-attributed on" in reason


def test_a_bill_and_a_rule_change_are_both_named(
    bills: Path,
    team: Team,
    finance_user: User,
    client: Client,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    _close(SEPT, finance_user, django_capture_on_commit_callbacks)
    client.force_login(finance_user)
    _add_rule_in_admin(client, team, "speech")
    ingest(write_focus(bills / "v2.csv", "2025-09", [("r1", "vision", "112.50"),
                                                     ("r2", "speech", "50.00")]))  # fmt: skip
    [adjustment] = statement_get(team=team, month=OCT).adjustments
    assert adjustment.amount == Decimal("62.50")
    assert "Restated bill for September 2025 after its close: bill (import #" in adjustment.reason
    assert "Rule change: mapping rule " in adjustment.reason


def test_a_reopened_and_closed_again_month_takes_back_what_was_booked(
    bills: Path,
    team: Team,
    finance_user: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    _close(SEPT, finance_user, django_capture_on_commit_callbacks)
    ingest(write_focus(bills / "v2.csv", "2025-09", [("r1", "vision", "112.50"),
                                                     ("r2", "speech", "50.00")]))  # fmt: skip
    _close(OCT, finance_user, django_capture_on_commit_callbacks)  # books +12.50 for September
    period_reopen(month=SEPT, actor=finance_user, reason="AWS credit memo")
    _close(SEPT, finance_user, django_capture_on_commit_callbacks)  # freezes 112.50

    # September's new statement holds the 12.50 October charged already: November gives it
    # back, and says why.
    [november] = statements_build(month=NOV)
    [adjustment] = november.adjustments
    assert (adjustment.origin_month, adjustment.amount) == (SEPT, Decimal("-12.50"))
    assert adjustment.reason.startswith("Reopened period: September 2025 was reopened on ")
    assert "(“AWS credit memo”)" in adjustment.reason
    assert "October 2025 booked for it" in adjustment.reason
    assert "Restated bill" not in adjustment.reason
