"""The demo's history (issue 29): six months by default, each month set apart as real fleets
are (history.py), spot jobs requeued under their JobID, run metrics in three formats; and, end to
end on a small four-month demo, the restated month, the read-only viewer, alerts raised on
their real days, email links at FINOPS_DEMO_URL and the runs' measured MFU."""

from __future__ import annotations

import io
import re
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from random import Random
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from finops.demo.dataset import dataset_build
from finops.demo.fleet import DAY, FleetPlan, Month, Pricing, Scale, build_fleet
from finops.demo.generate_sacct import render_sacct
from finops.demo.history import (
    RESERVATION,
    RESTATEMENT_CREDIT,
    history_plans,
    restated_index,
)
from finops.demo.jobs import Job
from finops.demo.run_metrics import MODELS, STARTUP, run_logs, run_metrics_write

LAST = Month(2025, 10)


def test_six_months_end_at_the_last_and_grow() -> None:
    plans = history_plans(last=LAST, count=6)
    assert [p.month.label for p in plans] == [
        "2025-05", "2025-06", "2025-07", "2025-08", "2025-09", "2025-10",
    ]  # fmt: skip
    growth = [p.fleet.growth for p in plans]
    assert growth == sorted(growth)
    assert growth[0] == pytest.approx(0.6)
    assert growth[-1] == 1.0
    # The reservation is bought half-way; the runaway is in the last month only.
    assert [RESERVATION in p.fleet.commitments for p in plans] == [False] * 3 + [True] * 3
    assert [bool(p.fleet.runaway) for p in plans] == [False] * 5 + [True]
    assert restated_index(6) == 2
    assert restated_index(3) is None
    across_a_year = history_plans(last=Month(2026, 2), count=4)
    assert [p.month.label for p in across_a_year] == ["2025-11", "2025-12", "2026-01", "2026-02"]


def test_weekend_scale_down_and_purchase_change_the_fleet() -> None:
    month = Month(2025, 10)  # 2025-10-04 is a Saturday
    plan = FleetPlan(growth=1.0, commitments=frozenset({"cud"}), weekends_off=True)
    nodes = build_fleet(rng=Random(1), month=month, scale=Scale.FULL, plan=plan)

    def up(day: int) -> int:
        t = day * DAY + 12 * 3600
        return sum(
            1 for n in nodes if n.pricing == Pricing.STANDARD and any(s <= t < e for s, e in n.up)
        )

    friday, saturday, sunday, monday = up(2), up(3), up(4), up(5)
    assert saturday == sunday < friday
    assert saturday < monday
    assert saturday >= friday // 2  # half the pool (never a pool's first node) stays
    # Without the savings plan and the reservation, their pools run on demand.
    pools = {n.pool.commitment for n in nodes}
    assert pools == {"", "cud"}


def _requeued(jobs: list[Job]) -> list[Job]:
    return [j for j in jobs if j.requeue_of is not None]


def test_history_month_requeues_preempted_jobs_under_their_job_id(tmp_path: Path) -> None:
    plans = history_plans(last=LAST, count=2)
    first, second = (
        dataset_build(seed=42, month=p.month, scale=Scale.SMALL, plan=p) for p in plans
    )
    jobs = first.jobs["aws-east"]
    requeued = _requeued(jobs)
    assert requeued
    for job in requeued:
        assert job.requeue_of is not None
        assert job.job_id == job.requeue_of.job_id
        assert job.requeue_of.state == "PREEMPTED"
        assert job.start is not None
        assert job.requeue_of.end is not None
        assert job.start >= job.requeue_of.end
    # sacct -D: the JobID printed once per attempt, each with its own Start.
    text = render_sacct(jobs=jobs, month=first.month, time_zone="UTC")
    lines = [line.split("|") for line in text.splitlines()[1:] if "." not in line.split("|")[0]]
    per_id = Counter(f[0] for f in lines)
    job = requeued[0]
    assert per_id[job.job_id] >= 2
    assert len({f[7] for f in lines if f[0] == job.job_id}) == per_id[job.job_id]
    # Months never share a job id or a run id on a cluster.
    for cluster in first.jobs:
        a, b = first.jobs[cluster], second.jobs[cluster]
        assert not {j.job_id for j in a} & {j.job_id for j in b}
        assert not {j.run_id for j in a} & {j.run_id for j in b}
    # The runaway: idle nodes billed in the last month only, with no job on them.
    runaway = [n for n in second.nodes if n.pool.partition == "h100-eval"]
    assert runaway
    assert not any(n.pool.partition == "h100-eval" for n in first.nodes)
    used = {h for js in second.jobs.values() for j in js for h in j.nodes}
    assert not used & {n.hostname for n in runaway}


def _job(run: str, start: int, end: int, state: str, gpus: int = 8) -> Job:
    return Job(
        cluster="aws-east", partition="h100", run_id=run, name=run, account="nlp", user="dana",
        uid=1, wckey="", comment="", gpu_model="h100", gpus_per_node=gpus, cpus_per_gpu=12,
        mem_gib_per_gpu=100, nodes=["aws-p5-001"], start=start, end=end, state=state,
    )  # fmt: skip


def test_a_preempted_attempt_loses_what_followed_its_last_checkpoint() -> None:
    month = Month(2025, 10)
    hour = 3600
    jobs = [
        _job("llama-ft-7b-r1", 0, 3 * hour + 2900, "PREEMPTED"),
        _job("llama-ft-7b-r1", 4 * hour, 8 * hour, "COMPLETED"),
    ]
    (log,) = run_logs(rng=Random(1), jobs=jobs, month=month)
    first, second = log.attempts
    model = MODELS["llama-ft-7b"]
    saved = [s for s in first if s.checkpoint]
    assert saved
    assert not first[-1].checkpoint
    assert first[-1].step > saved[-1].step
    # The second attempt starts over from the last checkpoint, not from where the first stopped.
    assert saved[-1].step < second[0].step < first[-1].step + (second[0].at - 4 * hour) // 60
    assert second[0].at == 4 * hour + STARTUP + model.log_every
    assert second[-1].checkpoint
    # Its true MFU is within the model's range: tokens x 6N / (GPU-seconds x peak) per attempt.
    steps = second[-1].step - saved[-1].step
    busy = second[-1].at - 4 * hour - STARTUP
    mfu = steps * model.batch * model.seq * 6 * model.params / (busy * 8 * 989e12)
    assert model.mfu[0] - 0.01 <= mfu <= model.mfu[1] + 0.01


def test_metrics_files_in_three_formats(tmp_path: Path) -> None:
    (plan,) = history_plans(last=LAST, count=1)
    dataset = dataset_build(seed=42, month=LAST, scale=Scale.FULL, plan=plan)
    jobs = [j for js in dataset.jobs.values() for j in js]
    logs = run_logs(rng=Random(1), jobs=jobs, month=LAST)
    files = run_metrics_write(logs=logs, month=LAST, out=tmp_path)
    assert {f.format for f in files} == {"csv", "megatron", "torchtitan"}
    megatron = next(f for f in files if f.format == "megatron")
    text = "".join(p.read_text() for p in sorted(megatron.path.iterdir()))
    assert "successfully saved checkpoint from iteration" in text
    assert " | consumed samples: " in text


@pytest.mark.django_db(transaction=True)
def test_four_month_demo_end_to_end(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from billing_ingest.models import CostLineItem, ImportBatch
    from finops.attribution.models import AllocatedCost
    from finops.budgets.models import BudgetAlert
    from finops.notifications.models import EmailNotification
    from finops.org.models import Profile, Team
    from finops.run_metrics.models import TrainingRun
    from finops.run_metrics.selectors import RunKey, run_efficiency

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    monkeypatch.setenv("FINOPS_DEMO_URL", "http://demo.example:9001")
    out = io.StringIO()
    call_command(
        "demo", "--scale", "small", "--month", "2025-10", "--months", "4", "--out",
        str(tmp_path), "--allow-demo-users", stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    months = [p.month for p in history_plans(last=LAST, count=4)]

    # Every month billed and attributed, to the cent.
    for month in months:
        period = month.start.date()
        items = CostLineItem.objects.settled().filter(billing_period=period)
        effective = sum(items.values_list("effective_cost", flat=True), Decimal(0))
        ledger = AllocatedCost.objects.filter(billing_period=period)
        assert effective > 0
        assert sum(ledger.values_list("amount", flat=True), Decimal(0)) == effective
        assert month.label in text

    # The restated month: the first AWS delivery superseded, the credit in the current one.
    restated = months[restated_index(4) or 0]
    period = restated.start.date()
    aws = ImportBatch.objects.filter(source="aws-cur-demo")
    batches = [b for b in aws if restated.label in b.billing_periods]
    assert sorted(b.status for b in batches) == ["succeeded", "superseded"]
    first, again = sorted(batches, key=lambda b: b.pk)
    assert first.status == "superseded"

    def credits(batch: ImportBatch) -> list[Decimal]:
        rows = CostLineItem.objects.filter(batch=batch, charge_category="Credit")
        return sorted(rows.values_list("billed_cost", flat=True))

    # The month's own Activate credit and the restatement's SLA credit; the first delivery's
    # rows are no longer counted anywhere.
    assert len(credits(again)) == 2
    assert RESTATEMENT_CREDIT in credits(again)
    assert CostLineItem.objects.settled().filter(batch=first).count() == 0
    assert f"restated {restated.label}" in text

    # The viewer reads what finance reads and changes nothing.
    viewer = Profile.objects.get(user__username="viewer")
    assert viewer.role == Profile.Role.VIEWER
    assert viewer.user.check_password("viewer-demo")
    client = Client()
    client.force_login(viewer.user)
    assert client.get("/budgets/").status_code == 200
    assert client.post("/budgets/new/", {"name": "x"}).status_code == 403
    assert "viewer (read-only): viewer" in text

    # Alerts raised day by day: each on the day its threshold was crossed, on many days.
    alerts = list(BudgetAlert.objects.all())
    assert alerts
    assert all(a.as_of == a.crossed_on for a in alerts)
    assert len({a.as_of for a in alerts}) > len(months)
    for alert in alerts:
        assert alert.period_start <= alert.as_of < alert.period_start + timedelta(days=31)
    assert "budget alerts, raised day by day" in text

    # Every email link points at the served site.
    bodies = list(EmailNotification.objects.values_list("text_body", "html_body"))
    links = [link for body in bodies for link in re.findall(r"https?://[^\s\"'<>]+", str(body))]
    assert links
    assert all(link.startswith("http://demo.example:9001/") for link in links), links[:5]

    # Run metrics in three formats, joined to the ledger's runs.
    formats = set(ImportBatch.objects.filter(kind="run_metrics").values_list("format", flat=True))
    assert formats >= {"csv", "megatron", "torchtitan"}
    # The ledger's runs joined: a 70B pre-training run's MFU as the app measures it (useful
    # tokens x FLOPs per token over allocated GPU-seconds x the H100's dense bf16 peak).
    pretrain = TrainingRun.objects.filter(
        team_slug="language", run_id__startswith="llama-pretrain-70b"
    ).first()
    assert pretrain is not None
    language = Team.objects.get(slug="language")
    key = RunKey(team_id=language.pk, team_slug="language", run_id=pretrain.run_id, currency="USD")
    efficiency = run_efficiency(key)
    assert efficiency is not None
    assert efficiency.mfu is not None
    assert Decimal("0.15") <= efficiency.mfu <= Decimal("0.55"), efficiency

    # The console speaks finance's words and prints no Python repr.
    assert "invoiced cost (BilledCost)" in text
    assert "amortised cost (EffectiveCost)" in text
    assert "Decimal(" not in text
    assert "datetime." not in text
    assert "Summary(" not in text
