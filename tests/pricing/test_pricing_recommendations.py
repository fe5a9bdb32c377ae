"""Recommendations as actions with money (issue 27, DESIGN section 10), worked by hand.

June 2025 (720 hours; the window's 30 days are filled: the first job starts 06-01 00:00). An
empty price catalogue (no_catalogue), so every ratio is the configured one:
spot 0.4, band "b" 7.3 % a month (0.0001 interruptions a node-hour), checkpoint 30 min, restart
10 min, committed 1y no upfront 0.6, percentile 10.

  team t1, CoreWeave gd-8xh100ib-i128 node cw-1, Standard, the whole month: paid 28,800
    (40/h), ListCost 35,452.80 (49.24/h). Job "long" holds 4 of its 8 GPUs the whole month.
  team t1, AWS p5.48xlarge node n-p5, Standard, 06-10 10:00-11:00: paid 80, ListCost 80;
    job "short" holds its 8 GPUs for the hour.
  team t1, AWS p4d.24xlarge node n-idle, Standard, the whole month: paid 14,400 (20/h),
    ListCost the same; job "tiny" holds its 8 GPUs 06-12 00:00-01:00, the rest is idle.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from billing_ingest.models import CostLineItem, ImportBatch, JobGpuUtilisation, JobRecord
from finops.attribution.services import attribution_month_run
from finops.audit.models import AuditEvent
from finops.org.models import MappingRule, Profile, Team
from finops.pricing.models import PricingAssumptions, Recommendation
from finops.pricing.recommendations import recommendations_refresh

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]

MONTH = dt.date(2025, 6, 1)
START = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
END = dt.datetime(2025, 7, 1, tzinfo=dt.UTC)


def _assumptions() -> None:
    PricingAssumptions.objects.update_or_create(
        pk=1,
        defaults=dict(
            spot_price_ratio=Decimal("0.4"), interruption_bands={"b": "0.073"}, family_bands={},
            default_band="b", checkpoint_interval_minutes=30, restart_minutes=10,
            reserved_ratios={"1y_no_upfront": "0.6", "1y_all_upfront": "0.5",
                             "3y_no_upfront": "0.4", "3y_all_upfront": "0.3"},
            recommendation_percentile=10,
        ),
    )  # fmt: skip


def _line(batch: ImportBatch, node: str, provider: str, itype: str, start: dt.datetime,
          end: dt.datetime, paid: str, listed: str) -> None:  # fmt: skip
    CostLineItem.objects.create(
        batch=batch, source="s", billing_period=MONTH, billing_period_start=START,
        provider_name=provider, billing_account_id="1", billing_currency="USD",
        charge_period_start=start, charge_period_end=end, charge_category="Usage",
        pricing_category="Standard", resource_name=node, region_id="r1",
        x_instance_type=itype, billed_cost=Decimal(paid), effective_cost=Decimal(paid),
        list_cost=Decimal(listed),
    )  # fmt: skip


def _job(batch: ImportBatch, job_id: str, account: str, node: str, gpus: int,
         start: dt.datetime, end: dt.datetime, endpoint: str = "") -> JobRecord:  # fmt: skip
    return JobRecord.objects.create(
        batch=batch, cluster="c", job_id=job_id, account=account, state="COMPLETED",
        start=start, end=end, gpus=gpus, nodes=[node], run_id=job_id, endpoint=endpoint,
    )  # fmt: skip


def _month() -> None:
    _assumptions()
    for slug in ("t1", "t2"):
        team = Team.objects.create(slug=slug, name=slug.upper())
        MappingRule.objects.create(kind="slurm_account", value=f"acct-{slug}", team=team)
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    short = dt.datetime(2025, 6, 10, 10, tzinfo=dt.UTC)
    tiny = dt.datetime(2025, 6, 12, tzinfo=dt.UTC)
    hour = dt.timedelta(hours=1)
    _line(billing, "cw-1", "CoreWeave", "gd-8xh100ib-i128", START, END, "28800", "35452.80")
    _line(billing, "n-p5", "AWS", "p5.48xlarge", short, short + hour, "80", "80")
    _line(billing, "n-idle", "AWS", "p4d.24xlarge", START, END, "14400", "14400")
    _job(jobs, "long", "acct-t1", "cw-1", 4, START, END)
    _job(jobs, "short", "acct-t1", "n-p5", 8, short, short + hour)
    _job(jobs, "tiny", "acct-t1", "n-idle", 8, tiny, tiny + hour)
    attribution_month_run(month=MONTH)


def _by_kind(team: str | None) -> dict[str, Recommendation]:
    rows = Recommendation.objects.filter(billing_period=MONTH, team__slug=team)
    if team is None:
        rows = Recommendation.objects.filter(billing_period=MONTH, team__isnull=True)
    return {row.kind: row for row in rows}


def test_commit_spot_and_idle_worked_by_hand() -> None:
    _month()
    recommendations_refresh(month=MONTH)
    mine = _by_kind("t1")
    # Commit (CoreWeave, per type): P10 of 4 GPUs every hour = 4.0 GPUs. Paid 28,800 / 720 / 8
    # = 5.00 a GPU-hour, list 35,452.80 / 720 / 8 = 6.155; committed 4 x 6.155 x 0.6 = 14.772
    # an hour; saves (4 x 5.00 - 14.772) x 730 = 5.228 x 730 = 3,816.44 a month; break-even
    # 12 x 14.772 / 20 = 8.8632 months.
    commit = mine["commit"]
    assert commit.monthly_savings == Decimal("3816.44")
    assert commit.action == (
        "Commit 4.0 x gd-8xh100ib-i128 GPUs (CoreWeave, r1) for 1 year, no upfront: saves "
        "3,816.44 USD a month at the P10 demand of the last 30 days; break-even after 8.9 months."
    )
    assert commit.currency == "USD"
    # The ratio is the configured one (empty catalogue): a 30-day window, estimated: low.
    assert commit.confidence == "low"
    assert commit.assumptions["committed_ratio_source"] == "configured ratio (estimated)"
    # Spot: "short" (1 h, 8 GPUs, p5: 80 paid, 80 list) and "tiny" (1 h on n-idle: 20, 20).
    # Loss per interruption min(30, 60) / 2 + 10 = 25 min; 0.0001 x 5/12 per node-hour.
    # 80 - 80 x 0.4 x (1 + 0.0001 x 5/12) = 47.99867; 20 - 8.00033 = 11.99967; 59.99833.
    spot = mine["spot"]
    assert spot.monthly_savings == Decimal("60.00")
    assert spot.evidence["runs"] == 2
    assert [r["run_id"] for r in spot.evidence["top_runs"]] == ["short", "tiny"]
    assert spot.evidence["top_runs"][0]["savings"] == "48.00"
    assert "Run these 2 training runs on spot" in spot.action
    assert "cost 60.00 USD less in June 2025" in spot.action
    # "long" ran the whole month: not short, not a spot candidate; the AWS savings plan finds
    # no demand in 90 % of the hours (P10 0): no plan.
    assert set(mine) == {"commit", "spot"}
    # Idle (no team bears it: the organisation's): n-idle billed 720 hours, 719 of them
    # without a job: at least 1 node spare in 90 % of the hours: release 1, 14,400 / 720 x 730.
    idle = _by_kind(None)["idle"]
    assert idle.monthly_savings == Decimal("14600.00")
    assert idle.key == "AWS:p4d.24xlarge:r1:on_demand"
    assert "was idle 100 % of the month: release 1 node" in idle.action


def test_a_recompute_keeps_status_and_comment_and_follows_the_assumptions() -> None:
    _month()
    recommendations_refresh(month=MONTH)
    commit = _by_kind("t1")["commit"]
    commit.status, commit.comment = "dismissed", "buying at org level"
    commit.save()
    PricingAssumptions.objects.filter(pk=1).update(
        reserved_ratios={"1y_no_upfront": "0.5", "1y_all_upfront": "0.5",
                         "3y_no_upfront": "0.4", "3y_all_upfront": "0.3"}
    )  # fmt: skip
    recommendations_refresh(month=MONTH)
    again = _by_kind("t1")["commit"]
    assert again.pk == commit.pk
    assert (again.status, again.comment) == ("dismissed", "buying at org level")
    # (4 x 5.00 - 4 x 6.155 x 0.5) x 730 = 7.69 x 730 = 5,613.70.
    assert again.monthly_savings == Decimal("5613.70")


def _user(name: str, role: str, teams: tuple[str, ...] = ()) -> User:
    user = User.objects.create_user(name, password="pw-123456789-x")
    profile = Profile.objects.create(user=user, role=role)
    for slug in teams:
        profile.teams.add(Team.objects.get(slug=slug))
    return user


def test_the_api_lists_and_a_lead_sees_and_changes_only_their_teams() -> None:
    _month()
    api = APIClient()
    api.force_authenticate(_user("fin", Profile.Role.FINANCE))
    # Computed on first read (no pipeline ran in this test).
    body = api.get("/api/v1/recommendations/?month=2025-06").json()
    items = body["results"] if isinstance(body, dict) else body
    assert [(i["team"], i["kind"]) for i in items] == [
        (None, "idle"), ("t1", "commit"), ("t1", "spot"),
    ]  # fmt: skip
    first = items[1]
    contract = {"id", "kind", "team", "title", "action", "monthly_savings", "currency",
                "confidence", "assumptions", "evidence", "status"}  # fmt: skip
    assert set(first) >= contract
    assert first["monthly_savings"] == "3816.44"
    assert first["status"] == "open"
    # Without a month: the newest attributed one.
    body = api.get("/api/v1/recommendations/").json()
    assert len(body["results"] if isinstance(body, dict) else body) == 3
    assert api.get("/api/v1/recommendations/?month=2025-13").status_code == 400
    org_id = items[0]["id"]

    lead = APIClient()
    lead.force_authenticate(_user("lead-t2", Profile.Role.TEAM_LEAD, ("t2",)))
    body = lead.get("/api/v1/recommendations/?month=2025-06").json()
    assert (body["results"] if isinstance(body, dict) else body) == []
    assert lead.get("/api/v1/recommendations/?month=2025-06&team=t1").status_code == 404
    assert lead.patch(f"/api/v1/recommendations/{first['id']}/", {"status": "done"},
                      format="json").status_code == 404  # fmt: skip
    assert lead.patch(f"/api/v1/recommendations/{org_id}/", {"status": "done"},
                      format="json").status_code == 404  # fmt: skip

    own = APIClient()
    own.force_authenticate(_user("lead-t1", Profile.Role.TEAM_LEAD, ("t1",)))
    changed = own.patch(
        f"/api/v1/recommendations/{first['id']}/",
        {"status": "done", "comment": "bought 4 GPUs reserved"}, format="json",
    )  # fmt: skip
    assert changed.status_code == 200
    assert changed.json()["status"] == "done"
    assert changed.json()["status_changed_by"] == "lead-t1"
    event = AuditEvent.objects.get(action="recommendation.status")
    assert event.details == {"status": ["open", "done"], "comment": "bought 4 GPUs reserved"}
    bad = own.patch(f"/api/v1/recommendations/{first['id']}/", {"status": "maybe"}, format="json")
    assert bad.status_code == 400


def test_rightsize_an_endpoint_that_uses_little_of_its_gpus(real_snapshot: None) -> None:
    """t2 serves "chat" from an AWS p5.48xlarge node the whole month (8 GPUs, paid 55.04 an
    hour, 39,628.80) at a measured 15 % utilisation. The catalogue's p5.48xlarge is 55.04 an
    hour (6.88 a GPU-hour), g6e.xlarge 1.861 (one L40S, tsaol/aws-gpu@2d0108c): at the same GPU
    count it costs 39,628.80 x (1 - 1.861 / 6.88) = 28,909.44 less a month."""
    _assumptions()
    team = Team.objects.create(slug="t2", name="T2")
    MappingRule.objects.create(kind="slurm_account", value="acct-t2", team=team)
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    _line(billing, "n-chat", "AWS", "p5.48xlarge", START, END, "39628.80", "39628.80")
    _job(jobs, "serve", "acct-t2", "n-chat", 8, START, END, endpoint="chat")
    JobGpuUtilisation.objects.create(
        cluster="c", job_id="serve", utilisation=Decimal("0.15"), batch=jobs
    )
    attribution_month_run(month=MONTH)
    recommendations_refresh(month=MONTH)
    rightsize = _by_kind("t2")["rightsize"]
    assert rightsize.monthly_savings == Decimal("28909.44")
    assert rightsize.action == (
        "Endpoint chat uses 15 % of its p5.48xlarge GPUs (measured utilisation): a smaller GPU "
        "type, g6e.xlarge, serves it for 28,909.44 USD less a month."
    )
    assert rightsize.confidence == "low"


def test_an_hourly_curve_counts_each_hour_by_its_overlap() -> None:
    from finops.pricing.demand import hourly, percentile_level

    start = START.timestamp()
    # 8 GPUs from 00:30 to 02:00: half of hour 0, all of hour 1; 2 GPUs for hours 1-3.
    curve = hourly(
        [(start + 1800, start + 7200, 8.0), (start + 3600, start + 4 * 3600, 2.0)],
        start=start, hours=5,
    )  # fmt: skip
    assert list(curve) == [4.0, 10.0, 2.0, 2.0, 0.0]
    assert percentile_level(curve, 10) == 0.0
    assert percentile_level(curve, 50) == 2.0


@pytest.mark.parametrize(("days", "window"), [(95, 90), (75, 60), (45, 30), (20, None)])
def test_commitment_advice_uses_the_longest_window_the_history_fills(
    days: int, window: int | None
) -> None:
    """A team that held 4 GPUs of a CoreWeave type in every hour since its first job, `days`
    before the window's end: the level comes from the longest of 90/60/30 days that history
    fills, and none when it fills not even 30 days."""
    import numpy as np

    from finops.pricing.comparisons import assumptions_current
    from finops.pricing.recommendation_commits import commit_drafts
    from finops.pricing.recommendation_inputs import Money, window_of

    _assumptions()
    span = window_of(MONTH)
    pool = ("CoreWeave", "gd-8xh100ib-i128", "r1", "on_demand")
    curve = np.zeros(span.hours)
    curve[-days * 24 :] = 4.0
    drafts = commit_drafts(
        curves={(7, *pool): curve}, starts={7: span.until - dt.timedelta(days=days)},
        rates={(7, "USD", *pool): Money(Decimal(2000), Decimal(2462), Decimal(400))},
        quotes={}, a=assumptions_current(), window=span,
    )  # fmt: skip
    if window is None:
        assert drafts == []
        return
    [draft] = drafts
    assert draft.assumptions["window_days"] == window
    assert draft.evidence["gpus"] == "4.0"
    # 4 x 5.00 - 4 x 6.155 x 0.6 = 5.228 an hour: 3,816.44 a month, whatever the window.
    assert draft.monthly_savings == Decimal("3816.44")
    assert draft.confidence == {90: "medium", 60: "low", 30: "low"}[window]
