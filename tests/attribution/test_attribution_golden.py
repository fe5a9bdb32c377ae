"""Golden scenarios for every attribution policy, computed by hand (DESIGN section 5).

Each test writes the inputs in their real formats (tests/attribution_inputs.py: a FOCUS CSV
bill, `sacct --parsable2` output, a `kubectl get pods -o json` list; utilisation and inference
usage CSVs), imports them with the real commands, runs `attribute --month 2025-06`, and reads
the ledger (AllocatedCost), the rollups (TeamDailyCost, RunCost, EndpointCost) and the
reconciliation API. Every expected amount is worked out in the comments from the inputs alone,
never with the engine's helpers.

Most GPU nodes are p5.48xlarge (8 H100). The billing month is June 2025; unless said otherwise a
line is for 2025-06-03 and times are UTC (sacct prints the cluster's local time; the clusters here
are UTC).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from billing_ingest.models import JobRecord
from finops.attribution.models import (
    AllocatedCost,
    Category,
    ChargeBasis,
    IdlePolicy,
    RunCost,
    SharedCostRule,
    SharedCostSplit,
    TeamDailyCost,
)
from finops.inference.models import EndpointCost
from finops.org.models import MappingRule, Profile, Team
from tests.attribution_inputs import (
    MONTH,
    attribute,
    ingest_bill,
    ingest_pods,
    ingest_sacct,
    job,
    line,
    local,
    pod,
    utc,
)

pytestmark = pytest.mark.django_db

DAY = dt.date(2025, 6, 3)
ZERO = Decimal(0)


# --- reading the results ----------------------------------------------------------------------


def slug(row: AllocatedCost | TeamDailyCost | RunCost) -> str | None:
    return row.team.slug if row.team is not None else None


def sums(key: Callable[[AllocatedCost], Any], **filters: Any) -> dict[Any, Decimal]:
    """Ledger amounts grouped by key(row), rows with a zero total left out."""
    result: dict[Any, Decimal] = defaultdict(Decimal)
    for row in AllocatedCost.objects.filter(**filters).select_related("team", "job"):
        result[key(row)] += row.amount
    return {k: v for k, v in result.items() if v}


def by_team(category: str) -> dict[str | None, Decimal]:
    return sums(slug, category=category)


def job_id(row: AllocatedCost) -> str:
    assert row.job is not None
    return row.job.job_id


def by_job(category: str = Category.TRAINING) -> dict[str, Decimal]:
    return sums(job_id, category=category, job__isnull=False)


def gpu_seconds(job_id: str) -> Decimal:
    rows = AllocatedCost.objects.filter(job__job_id=job_id)
    return sum((r.gpu_seconds for r in rows), ZERO)


def daily(**filters: Any) -> dict[tuple[dt.date, str | None, str], Decimal]:
    return {
        (row.day, slug(row), row.category): row.amount
        for row in TeamDailyCost.objects.filter(**filters).select_related("team")
        if row.amount
    }


def run(run_id: str) -> RunCost:
    return RunCost.objects.select_related("team").get(run_id=run_id)


@pytest.fixture
def finance_api(db: None) -> APIClient:
    user = User.objects.create_user("finance", password="finance-password-1")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    client = APIClient()
    client.force_authenticate(user)
    return client


def reconcile(api: APIClient, billed: str, **categories: str) -> None:
    """The reconciliation API: billed, each category as given (the others 0), difference 0 for
    the month and for every provider x account."""
    body = api.get("/api/v1/reconciliation/", {"month": MONTH}).json()
    assert Decimal(body["billed"]) == Decimal(billed)
    expected = {c: Decimal(categories.get(c, "0")) for c in Category.values}
    assert {c: Decimal(v) for c, v in body["attributed"].items()} == expected
    assert Decimal(body["difference"]) == 0
    assert body["by_account"]
    assert all(Decimal(r["difference"]) == 0 for r in body["by_account"])


# --- Slurm: multi-node jobs, two jobs sharing a node --------------------------------------------


def test_slurm_multi_node_job_and_partial_overlap_on_one_node(
    tmp_path: Path, finance_api: APIClient
) -> None:
    ingest_bill(tmp_path, [
        line("160", utc(10), utc(12), node="n1"),
        line("160", utc(10), utc(12), node="n2"),
        line("80", utc(10), utc(11), node="n3"),
    ])  # fmt: skip
    ingest_sacct(
        tmp_path, "hpc",
        job("101", "vision", "COMPLETED", local(10), local(11.5), 12, "n[1-2]", node_count=2,
            name="pretrain"),
        job("103", "speech", "COMPLETED", local(10), local(10.5), 4, "n3", name="eval"),
        job("104", "nlp", "COMPLETED", local(10.25), local(11), 4, "n3", name="tune"),
    )  # fmt: skip
    attribute()

    # n1 and n2: $160 for 10:00-12:00 = $80 an hour = $10 per GPU-hour. Job 101's gres/gpu=12
    # is its total over 2 nodes: 6 GPUs on each.
    #   10-11: 6 GPUs x 1 h = 6 GPU-h -> 60; idle 8 - 6 = 2 GPU-h -> 20
    #   11-12: 6 GPUs x 0.5 h = 3 GPU-h -> 30; idle 8 - 3 = 5 GPU-h -> 50
    #   per node: job 90, idle 70; job 101 over both nodes: 180 for 2 x 9 = 18 GPU-hours.
    # n3: $80 for 10-11, $10 per GPU-hour. 103 holds 4 GPUs 10:00-10:30 (2 GPU-h -> 20), 104
    # holds 4 GPUs 10:15-11:00 (3 GPU-h -> 30); from 10:15 to 10:30 they hold 8 GPUs together,
    # never more than the node has. Idle: 8 - 2 - 3 = 3 GPU-h -> 30.
    assert by_job() == {"101": Decimal(180), "103": Decimal(20), "104": Decimal(30)}
    assert sums(lambda r: r.node, job__job_id="101") == {"n1": Decimal(90), "n2": Decimal(90)}
    assert sums(lambda r: (r.node, slug(r)), category="idle") == {
        ("n1", None): Decimal(70), ("n2", None): Decimal(70), ("n3", None): Decimal(30),
    }  # fmt: skip
    assert by_team("training") == {"vision": 180, "speech": 20, "nlp": 30}
    # GPU-seconds: 101: 12 GPUs x 1.5 h = 64800; 103: 4 x 1800 = 7200; 104: 4 x 2700 = 10800.
    assert [gpu_seconds(j) for j in ("101", "103", "104")] == [64800, 7200, 10800]
    pretrain = run("pretrain")
    assert (pretrain.cost, pretrain.gpu_hours, pretrain.cost_per_gpu_hour) == (180, 18, 10)
    assert (slug(pretrain), pretrain.jobs, pretrain.wasted_cost) == ("vision", 1, 0)
    assert daily() == {
        (DAY, "vision", "training"): Decimal(180),
        (DAY, "speech", "training"): Decimal(20),
        (DAY, "nlp", "training"): Decimal(30),
        (DAY, None, "idle"): Decimal(170),
    }
    # Bill: 160 + 160 + 80 = 400 = training 230 + idle 170.
    reconcile(finance_api, "400", training="230", idle="170")


# --- Kubernetes: MIG slices and time-sliced GPUs on one node -----------------------------------


def test_kubernetes_mig_slices_and_time_sliced_gpus_on_one_node(
    tmp_path: Path, finance_api: APIClient
) -> None:
    ingest_bill(tmp_path, [line("56", utc(10), utc(11), node="k1")])
    mig = "nvidia.com/mig-{}"
    ingest_pods(
        tmp_path, "gke",
        pod("a", "vision", "k1", {mig.format("1g.10gb"): "1"}, utc(10), utc(11)),
        pod("b", "speech", "k1", {mig.format("3g.40gb"): "1"}, utc(10), utc(11)),
        pod("c", "nlp", "k1", {mig.format("7g.80gb"): "1"}, utc(10), utc(11)),
        pod("d", "vision", "k1", {"nvidia.com/gpu.shared": "1"}, utc(10), utc(11)),
        pod("e", "speech", "k1", {"nvidia.com/gpu.shared": "2"}, utc(10), utc(11)),
        # Still running: it holds its GPUs to the end of the billed period (cost to date).
        pod("f", "research", "k1", {"nvidia.com/gpu": "2"}, utc(10.5), phase="Running"),
        replicas=4,
    )  # fmt: skip
    attribute()

    # $56 for 8 GPUs for an hour: $7 per GPU-hour, $1 per 1/7 of a GPU-hour.
    #   a: MIG 1g = 1/7 GPU x 1 h -> 1        b: MIG 3g = 3/7 GPU -> 3      c: MIG 7g = 1 GPU -> 7
    #   d: 1 time-sliced replica of 4 = 1/4 GPU -> 7/4 = 1.75
    #   e: 2 replicas = 2/4 GPU -> 3.5
    #   f: 2 GPUs from 10:30 to the end of the hour = 1 GPU-hour -> 7
    # Held: 1/7 + 3/7 + 1 + 1/4 + 1/2 = 65/28 GPUs, + 2 from 10:30: at most 121/28 < 8.
    # Idle: 56 - (1 + 3 + 7 + 1.75 + 3.5 + 7) = 56 - 23.25 = 32.75.
    assert by_job() == {
        "vision/a": Decimal(1), "speech/b": Decimal(3), "nlp/c": Decimal(7),
        "vision/d": Decimal("1.75"), "speech/e": Decimal("3.5"), "research/f": Decimal(7),
    }  # fmt: skip
    assert by_team("idle") == {None: Decimal("32.75")}
    assert by_team("training") == {
        "vision": Decimal("2.75"), "speech": Decimal("6.5"), "nlp": 7, "research": 7,
    }  # fmt: skip
    # GPU-seconds, exact fractions quantised to 6 places: a 3600/7 = 514.2857142857...,
    # b 3 x 3600/7 = 1542.857142857..., d 3600/4 = 900, e 1800, f 2 x 1800 = 3600.
    assert gpu_seconds("vision/a") == Decimal("514.285714")
    assert gpu_seconds("speech/b") == Decimal("1542.857143")
    assert [gpu_seconds(j) for j in ("nlp/c", "vision/d", "speech/e", "research/f")] == [
        3600, 900, 1800, 3600,
    ]  # fmt: skip
    running = run("f")
    assert (running.cost, running.running_jobs, running.last_end) == (7, 1, None)
    reconcile(finance_api, "56", training="23.25", idle="32.75")


# --- idle policies: keep, spread, platform ------------------------------------------------------


def test_idle_policies_keep_spread_and_platform(tmp_path: Path, finance_api: APIClient) -> None:
    ops = Team.objects.create(slug="ops", name="Ops")
    IdlePolicy.objects.create(node_prefix="s", policy="spread")
    IdlePolicy.objects.create(node_prefix="k", policy="keep")
    IdlePolicy.objects.create(node_prefix="o", policy="keep", owner_team=ops)
    IdlePolicy.objects.create(node_prefix="p", policy="platform")
    speech_tag = {"team": "speech"}
    ingest_bill(tmp_path, [
        line("80", utc(10), utc(11), node="s1"),
        line("16", utc(10), utc(11), node="s2"),
        line("80", utc(10, day=4), utc(11, day=4), node="s1"),
        line("40", utc(10), utc(11), node="k1", tags=speech_tag),
        line("40", utc(10), utc(11), node="o1"),
        line("40", utc(10), utc(11), node="p1", tags=speech_tag),
    ])  # fmt: skip
    ingest_sacct(
        tmp_path, "c1",
        job("201", "vision", "COMPLETED", local(10), local(11), 4, "s1", name="a"),
        job("202", "speech", "COMPLETED", local(10), local(10.5), 2, "s1", name="b"),
        job("203", "nlp", "COMPLETED", local(10, day=4), local(10.5, day=4), 8, "s1", name="c"),
        job("204", "vision", "COMPLETED", local(10), local(11), 4, "k1", name="d"),
        job("205", "nlp", "COMPLETED", local(10), local(11), 2, "o1", name="e"),
        job("206", "vision", "COMPLETED", local(10), local(10.25), 8, "p1", name="f"),
    )  # fmt: skip
    attribute()

    # Training ($ per GPU-hour = line / 8):
    #   s1 06-03 ($10): 201 4 GPU-h -> 40; 202 2 GPUs x 0.5 h -> 10; idle 80 - 50 = 30
    #   s2 06-03 ($2): no jobs; idle 16
    #   s1 06-04 ($10): 203 8 GPUs x 0.5 h -> 40; idle 40
    #   k1 ($5): 204 4 GPU-h -> 20, idle 20;  o1 ($5): 205 2 GPU-h -> 10, idle 30
    #   p1 ($5): 206 8 GPUs x 0.25 h -> 10, idle 30
    assert by_job() == {
        "201": Decimal(40), "202": Decimal(10), "203": Decimal(40), "204": Decimal(20),
        "205": Decimal(10), "206": Decimal(10),
    }  # fmt: skip
    jobs = {j.job_id: j.pk for j in JobRecord.objects.all()}
    idle = sums(lambda r: (r.day, r.node, slug(r), r.job_id), category="idle")
    assert idle == {
        # spread, pool "s*", 06-03: idle 30 (s1) + 16 (s2) = 46 over that day's jobs of the
        # pool pro rata to their cost 40 : 10 -> 201 gets 46 x 40/50 = 36.8, 202 46 x 10/50 =
        # 9.2. The rows carry the job and its team, no node.
        (DAY, "", "vision", jobs["201"]): Decimal("36.8"),
        (DAY, "", "speech", jobs["202"]): Decimal("9.2"),
        # 06-04: only 203 ran in the pool: all 40 of that day's idle is its.
        (dt.date(2025, 6, 4), "", "nlp", jobs["203"]): Decimal(40),
        # keep without an owner: the node line's own owner (tagged team=speech).
        (DAY, "k1", "speech", None): Decimal(20),
        # keep with an owner: the pool's owner team.
        (DAY, "o1", "ops", None): Decimal(30),
        # platform without a team: a teamless finance bucket, whatever the line's tag says.
        (DAY, "p1", None, None): Decimal(30),
    }
    # A run's cost is fully loaded: training 40 + spread idle 36.8; its GPU-hours stay 4.
    a = run("a")
    assert (a.cost, a.gpu_hours) == (Decimal("76.8"), 4)
    assert daily(day=DAY) == {
        (DAY, "vision", "training"): Decimal(70),  # 40 + 20 + 10
        (DAY, "vision", "idle"): Decimal("36.8"),
        (DAY, "speech", "training"): Decimal(10),
        (DAY, "speech", "idle"): Decimal("29.2"),  # 9.2 spread + 20 kept on k1
        (DAY, "nlp", "training"): Decimal(10),
        (DAY, "ops", "idle"): Decimal(30),
        (DAY, None, "idle"): Decimal(30),
    }
    # Bill: 80 + 16 + 80 + 40 + 40 + 40 = 296 = training 130 + idle 166.
    reconcile(finance_api, "296", training="130", idle="166")


# --- charge basis: requested vs used ----------------------------------------------------------


def test_charge_basis_used_moves_the_unused_part_to_idle(
    tmp_path: Path, finance_api: APIClient
) -> None:
    ingest_bill(tmp_path, [line("80", utc(10), utc(11), node="g1")])
    ingest_sacct(
        tmp_path, "u1",
        job("301", "vision", "COMPLETED", local(10), local(11), 4, "g1"),
        job("302", "speech", "COMPLETED", local(10), local(11), 4, "g1"),
    )  # fmt: skip
    utilisation = tmp_path / "utilisation.csv"
    utilisation.write_text("job_id,utilisation\n301,25%\n")
    call_command(
        "ingest_utilisation", "--format", "csv", str(utilisation), "--cluster", "u1",
        stdout=StringIO(),
    )  # fmt: skip

    # requested (the default): $80 / 8 GPUs = $10 per GPU-hour; 4 GPU-h each -> 40 + 40.
    attribute()
    assert by_job() == {"301": Decimal(40), "302": Decimal(40)}
    assert by_team("idle") == {}
    reconcile(finance_api, "80", training="80")

    # used: 301 is charged 4 GPUs x 25% = 1 GPU-hour -> 10; 302 has no utilisation and stays
    # charged as requested -> 40. The 3 GPU-hours 301 held but did not use are idle: 30.
    ChargeBasis.objects.create(cluster="u1", basis="used")
    attribute()
    assert by_job() == {"301": Decimal(10), "302": Decimal(40)}
    assert sums(lambda r: (r.node, slug(r)), category="idle") == {("g1", None): Decimal(30)}
    assert gpu_seconds("301") == 3600  # the charged GPU-seconds: 1 GPU-hour
    assert gpu_seconds("302") == 4 * 3600
    reconcile(finance_api, "80", training="50", idle="30")


# --- shared-cost rules for untagged lines -----------------------------------------------------


def test_shared_cost_rules_even_gpu_spend_and_fixed(
    tmp_path: Path, finance_api: APIClient, team: Team, other_team: Team
) -> None:
    fixed = SharedCostRule.objects.create(name="tax", charge_category="Tax", method="fixed",
                                          priority=10)  # fmt: skip
    SharedCostSplit.objects.create(rule=fixed, team=team, percent=Decimal(60))
    SharedCostSplit.objects.create(rule=fixed, team=other_team, percent=Decimal(40))
    SharedCostRule.objects.create(name="credits", charge_category="Credit", method="gpu_spend",
                                  priority=10)  # fmt: skip
    SharedCostRule.objects.create(name="storage", service_category="Storage", method="even")
    SharedCostRule.objects.create(name="network", service_category="Networking",
                                  method="gpu_spend")  # fmt: skip
    SharedCostRule.objects.create(name="support", service_name="AWS Support", method="even")
    hour = (utc(10), utc(11))
    ingest_bill(tmp_path, [
        line("60", *hour, node="x1"),
        line("20", *hour, node="x2"),
        line("10", *hour, category="Storage", service="Amazon S3", tags={"team": "ml"}),
        line("9", *hour, category="Storage", service="Amazon S3"),
        line("8", *hour, category="Networking", service="AWS Data Transfer"),
        line("6", *hour, category="Management and Governance", service="AWS Support"),
        line("5", *hour, charge="Tax", category="Other", service="Tax"),
        line("-4", *hour, charge="Credit", service="Amazon EC2 Credits"),
        line("1.5", *hour, category="Other", service="AWS Marketplace"),
    ])  # fmt: skip
    ingest_sacct(
        tmp_path, "c1",
        job("1", "vision", "COMPLETED", local(10), local(11), 8, "x1"),
        job("2", "speech", "COMPLETED", local(10), local(11), 8, "x2"),
    )  # fmt: skip
    attribute()

    # Direct spend: vision 60 and speech 20 training (GPU spend), ml 10 tagged (spend, not GPU
    # spend). The tagged S3 line is ml's although the storage rule matches it: mapped lines are
    # never shared.
    assert by_team("training") == {"vision": 60, "speech": 20}
    assert by_team("tagged") == {"ml": 10}
    shared = sums(lambda r: (r.service_name, slug(r)), category="shared")
    assert shared == {
        # even among the 3 teams with direct spend: 9 / 3 = 3 each.
        ("Amazon S3", "vision"): 3, ("Amazon S3", "speech"): 3, ("Amazon S3", "ml"): 3,
        # gpu_spend, pro rata 60 : 20: 8 x 3/4 = 6, 8 x 1/4 = 2.
        ("AWS Data Transfer", "vision"): 6, ("AWS Data Transfer", "speech"): 2,
        # support, even: 6 / 3 = 2 each.
        ("AWS Support", "vision"): 2, ("AWS Support", "speech"): 2, ("AWS Support", "ml"): 2,
        # tax, fixed 60 % / 40 %: 3 and 2.
        ("Tax", "vision"): 3, ("Tax", "speech"): 2,
        # credit, gpu_spend with its sign: -4 x 3/4 = -3, -4 x 1/4 = -1.
        ("Amazon EC2 Credits", "vision"): -3, ("Amazon EC2 Credits", "speech"): -1,
    }  # fmt: skip
    # Per team: vision 3 + 6 + 2 + 3 - 3 = 11; speech 3 + 2 + 2 + 2 - 1 = 8; ml 3 + 2 = 5.
    assert by_team("shared") == {"vision": 11, "speech": 8, "ml": 5}
    # No rule matches the marketplace line: unallocated.
    assert by_team("unallocated") == {None: Decimal("1.5")}
    assert daily(category="shared") == {
        (DAY, "vision", "shared"): Decimal(11),
        (DAY, "speech", "shared"): Decimal(8),
        (DAY, "ml", "shared"): Decimal(5),
    }
    # Bill: 60 + 20 + 10 + 9 + 8 + 6 + 5 - 4 + 1.5 = 115.5.
    reconcile(finance_api, "115.5", training="80", tagged="10", shared="24", unallocated="1.5")


# --- mapping rules ----------------------------------------------------------------------------


def test_mapping_rules_in_priority_order(
    tmp_path: Path, finance_api: APIClient, team: Team, other_team: Team
) -> None:
    research = Team.objects.create(slug="research", name="Research")
    ops = Team.objects.create(slug="ops", name="Ops")
    nlp = Team.objects.create(slug="nlp", name="NLP")
    # The code applies rules by their priority number (lower first, then creation); DESIGN 5.5
    # lists the kinds tag, sub-account, Slurm account, namespace: priorities here follow it.
    MappingRule.objects.create(kind="tag", key="project", value="llm", team=team, priority=10)
    MappingRule.objects.create(kind="sub_account", value="sub-9", team=other_team, priority=20)
    MappingRule.objects.create(kind="slurm_account", value="ml", team=research, priority=30)
    MappingRule.objects.create(kind="namespace", value="ml", team=ops, priority=40)
    # An explicit lower number puts a sub-account rule before a tag rule.
    MappingRule.objects.create(kind="sub_account", value="sub-7", team=nlp, priority=5)
    # A Slurm-account rule never speaks about a pod, even one whose team label matches it.
    MappingRule.objects.create(kind="slurm_account", value="nlp", team=team, priority=1)
    s3 = partial(line, category="Storage", service="Amazon S3")
    hour = (utc(10), utc(11))
    ingest_bill(tmp_path, [
        s3("10", *hour, sub="sub-9", tags={"project": "llm", "team": "zzz"}),
        s3("3", *hour, sub="sub-9", tags={"team": "nlp"}),
        s3("4", *hour, tags={"finops:team": "nlp"}),
        s3("1", *hour, sub="sub-7", tags={"project": "llm"}),
        s3("2.5", *hour),
        line("80", *hour, node="m1"),
        line("80", *hour, node="m2"),
    ])  # fmt: skip
    ingest_sacct(tmp_path, "hpc", job("401", "ml", "COMPLETED", local(10), local(11), 8, "m1"))
    ingest_pods(
        tmp_path, "gke",
        pod("trainer", "ml", "m2", {"nvidia.com/gpu": "8"}, utc(10), utc(11),
            labels={"team": "nlp"}),
    )  # fmt: skip
    attribute()

    tagged = sums(lambda r: (r.sub_account_id, slug(r)), category="tagged")
    assert tagged == {
        # project=llm (tag rule, priority 10) before sub-9 (20) and before the `team` tag.
        ("sub-9", "vision"): Decimal(10),
        # sub-9 (an explicit rule) before the out-of-the-box `team` tag convention.
        ("sub-9", "speech"): Decimal(3),
        # no rule: the finops:team tag names the team.
        ("", "nlp"): Decimal(4),
        # sub-7 (priority 5) before project=llm (priority 10).
        ("sub-7", "nlp"): Decimal(1),
    }
    assert by_team("unallocated") == {None: Decimal("2.5")}
    # The Slurm job by its account rule; the pod by its namespace rule, not by its team label
    # (account nlp), and not by the Slurm-account rule for nlp.
    assert sums(lambda r: (job_id(r), slug(r)), category="training") == {
        ("401", "research"): Decimal(80), ("ml/trainer", "ops"): Decimal(80),
    }  # fmt: skip
    assert not Team.objects.filter(slug__in=["zzz", "ml"]).exists()
    reconcile(finance_api, "180.5", training="160", tagged="18", unallocated="2.5")


# --- monthly, daily and one-off lines, credits: spread, allocated, never dropped ----------------


def test_monthly_daily_one_off_and_credit_lines_are_never_dropped(
    tmp_path: Path, finance_api: APIClient
) -> None:
    SharedCostRule.objects.create(name="credits", charge_category="Credit", method="even")
    month = (utc(0, day=1), utc(0, day=1, month=7))
    ingest_bill(tmp_path, [
        # A monthly fee, tagged: 30 over the 30 days of June = 1 a day.
        line("30", *month, charge="Purchase", category="Other", service="Enterprise Support",
             tags={"team": "vision"}),
        line("6", utc(10), utc(11), category="Storage", service="Amazon S3",
             tags={"team": "speech"}),
        line("3", utc(10), utc(11), category="Storage", service="Amazon EFS",
             tags={"team": "nlp"}),
        # A monthly credit, untagged, shared even: -9 / 30 days = -0.3 a day, -0.1 per team.
        line("-9", *month, charge="Credit", category="Other", service="Promotional Credit"),
        # A daily fee with no owner and no rule: unallocated on its day.
        line("2.40", utc(0, day=5), utc(0, day=6), category="Other", service="AWS Config"),
        # A one-off charge with no duration: all of it on the day it starts.
        line("12.34", utc(0, day=15), utc(0, day=15), charge="Purchase", category="Other",
             service="Marketplace Setup Fee"),
        # A late charge for May on the June invoice: June's, on its own day.
        line("5", utc(10, day=31, month=5), utc(11, day=31, month=5), category="Storage",
             service="Amazon S3 Glacier", tags={"team": "vision"}),
    ])  # fmt: skip
    attribute()

    june = [dt.date(2025, 6, d) for d in range(1, 31)]
    vision_tagged = {day: Decimal(1) for day in june}
    vision_tagged[dt.date(2025, 5, 31)] = Decimal(5)
    assert {d: a for (d, _, _), a in daily(team__slug="vision", category="tagged").items()} == (
        vision_tagged
    )
    # Even among the teams with direct spend in the month (vision 35, speech 6, nlp 3).
    credit = daily(category="shared")
    assert credit == {
        (day, team, "shared"): Decimal("-0.1")
        for day in june
        for team in ("vision", "speech", "nlp")
    }
    assert by_team("shared") == {"vision": Decimal(-3), "speech": Decimal(-3), "nlp": Decimal(-3)}
    assert daily(category="unallocated") == {
        (dt.date(2025, 6, 5), None, "unallocated"): Decimal("2.40"),
        (dt.date(2025, 6, 15), None, "unallocated"): Decimal("12.34"),
    }
    # Every line lands whole: per service, the ledger holds exactly its cost.
    assert sums(lambda r: r.service_name) == {
        "Enterprise Support": Decimal(30), "Amazon S3": Decimal(6), "Amazon EFS": Decimal(3),
        "Promotional Credit": Decimal(-9), "AWS Config": Decimal("2.40"),
        "Marketplace Setup Fee": Decimal("12.34"), "Amazon S3 Glacier": Decimal(5),
    }  # fmt: skip
    # Bill: 30 + 6 + 3 - 9 + 2.40 + 12.34 + 5 = 49.74 = tagged 44 - shared 9 + unallocated 14.74.
    reconcile(finance_api, "49.74", tagged="44", shared="-9", unallocated="14.74")


# --- runs: retries, preempted restarts and array tasks fold into one run ------------------------


def test_runs_fold_retries_preemptions_and_array_tasks(
    tmp_path: Path, finance_api: APIClient
) -> None:
    ingest_bill(tmp_path, [
        line("240", utc(10), utc(13), node="r1"),
        line("80", utc(12), utc(13), node="r2"),
        line("80", utc(10), utc(11), node="r3"),
    ])  # fmt: skip
    name = "llama-70b-pretrain"
    ingest_sacct(
        tmp_path, "hpc",
        # One run by WCKey (sacct prints a default wckey with a leading *): preempted, retried
        # after a failure, then completed.
        job("310", "vision", "PREEMPTED", local(10), local(10.5), 8, "r1", name=name,
            wckey="*llama-70b"),
        job("311", "vision", "FAILED", local(10.5), local(11), 8, "r1", name=name,
            wckey="llama-70b"),
        job("312", "vision", "COMPLETED", local(11), local(12.5), 8, "r1", name=name,
            wckey="llama-70b"),
        # An array's tasks (their own ids 301, 302) by `run=` in the comment.
        job("300_1", "speech", "COMPLETED", local(12.5), local(13), 4, "r1", raw="301",
            name="sweep", comment="run=sweep-7 lr=3e-4"),
        job("300_2", "speech", "FAILED", local(12.5), local(12.75), 4, "r1", raw="302",
            name="sweep", comment="run=sweep-7 lr=1e-4"),
        # Still running (End Unknown): cost to date, to the end of the billed period.
        job("320", "nlp", "RUNNING", local(12), "Unknown", 2, "r2", name="notebook"),
    )  # fmt: skip
    finetune = {"batch.kubernetes.io/job-name": "finetune"}
    ingest_pods(
        tmp_path, "gke",
        # A Kubernetes Job's pods: the first evicted (preempted), the second completes.
        pod("finetune-a1", "vision", "r3", {"nvidia.com/gpu": "4"}, utc(10), utc(10.5),
            labels=finetune, phase="Failed", reason="Evicted"),
        pod("finetune-b2", "vision", "r3", {"nvidia.com/gpu": "4"}, utc(10.5), utc(11),
            labels=finetune),
    )  # fmt: skip
    attribute()

    # r1: $240 for 10:00-13:00, $80 an hour, $10 per GPU-hour.
    #   310: 8 GPUs x 0.5 h = 4 GPU-h -> 40 (preempted: waste)
    #   311: 8 x 0.5 = 4 GPU-h -> 40 (failed: waste)
    #   312: 8 x 1.5 = 12 GPU-h -> 120
    #   300_1: 4 x 0.5 = 2 GPU-h -> 20; 300_2: 4 x 0.25 = 1 GPU-h -> 10 (failed: waste)
    #   idle: 12:45-13:00 4 GPUs free = 1 GPU-h -> 10
    # r2: $80 for 12-13; 320 holds 2 GPUs from 12:00 to the end of the period: 2 GPU-h -> 20.
    # r3: $80 for 10-11; each pod 4 GPUs x 0.5 h = 2 GPU-h -> 20; idle 40.
    expected = {
        # run: (team, cost, wasted, GPU-hours, $/GPU-hour, jobs, failed, running)
        "llama-70b": ("vision", 200, 80, 20, 10, 3, 2, 0),
        "sweep-7": ("speech", 30, 10, 3, 10, 2, 1, 0),
        "notebook": ("nlp", 20, 0, 2, 10, 1, 0, 1),
        "finetune": ("vision", 40, 20, 4, 10, 2, 1, 0),
    }
    runs = {
        r.run_id: (slug(r), r.cost, r.wasted_cost, r.gpu_hours, r.cost_per_gpu_hour, r.jobs,
                   r.failed_jobs, r.running_jobs)
        for r in RunCost.objects.select_related("team")
    }  # fmt: skip
    assert runs == expected
    assert run("llama-70b").first_start == dt.datetime(2025, 6, 3, 10, tzinfo=dt.UTC)
    assert run("llama-70b").last_end == dt.datetime(2025, 6, 3, 12, 30, tzinfo=dt.UTC)
    assert run("notebook").last_end is None
    body = finance_api.get("/api/v1/runs/", {"month": MONTH}).json()
    api = {r["run_id"]: r for r in body["results"]}
    assert Decimal(api["llama-70b"]["cost_per_gpu_hour"]) == 10
    assert Decimal(api["llama-70b"]["wasted_cost"]) == 80
    assert Decimal(api["llama-70b"]["gpu_hours"]) == 20
    # Bill: 240 + 80 + 80 = 400 = training 290 + idle 10 + 60 + 40.
    reconcile(finance_api, "400", training="290", idle="110")


# --- inference endpoints ----------------------------------------------------------------------


def serving_scene(tmp_path: Path) -> None:
    """i1 ($80, 10-11): pod chat-0 serves endpoint `chat` on 2 GPUs, pod train-x trains on 4;
    the endpoint served 4000 requests, 1.5M prompt and 0.5M generated tokens that hour."""
    ingest_bill(tmp_path, [line("80", utc(10), utc(11), node="i1")])
    ingest_pods(
        tmp_path, "serve",
        pod("chat-0", "serve", "i1", {"nvidia.com/gpu": "2"}, utc(10), utc(11),
            labels={"finops.io/endpoint": "chat", "team": "assistant"}),
        pod("train-x", "vision", "i1", {"nvidia.com/gpu": "4"}, utc(10), utc(11)),
    )  # fmt: skip
    usage = tmp_path / "usage.csv"
    usage.write_text(
        "endpoint,window_start,window_end,requests,prompt_tokens,generation_tokens\n"
        "chat,2025-06-03T10:00:00Z,2025-06-03T11:00:00Z,4000,1500000,500000\n"
    )
    call_command("ingest_inference", "--format", "csv", str(usage), "--cluster", "serve",
                 stdout=StringIO())  # fmt: skip


def test_inference_endpoint_unit_costs_and_idle_share(
    tmp_path: Path, finance_api: APIClient
) -> None:
    serving_scene(tmp_path)
    attribute()

    # i1: $80 for the hour, $10 per GPU-hour. chat-0: 2 GPU-h -> 20, booked as inference (DESIGN
    # 5: a pod serving an endpoint); train-x: 4 GPU-h -> 40 training; idle 80 - 60 = 20.
    assert by_team("inference") == {"assistant": Decimal(20)}
    assert by_team("training") == {"vision": Decimal(40)}
    assert by_team("idle") == {None: Decimal(20)}
    cost = EndpointCost.objects.get(endpoint="chat", day=DAY)
    # $/1k requests = 20 x 1000 / 4000 = 5; tokens 1.5M + 0.5M = 2M, $/1M tokens = 20 / 2 = 10.
    assert (cost.cost, cost.requests, cost.tokens) == (20, 4000, 2_000_000)
    assert (cost.cost_per_1k_requests, cost.cost_per_1m_tokens) == (5, 10)
    assert cost.gpu_seconds == 2 * 3600
    # Serving capacity: everything on i1 that day (80), of which idle 20: share 0.25.
    assert (cost.node_cost, cost.node_idle_cost, cost.idle_share) == (80, 20, Decimal("0.25"))
    assert daily() == {
        (DAY, "assistant", "inference"): Decimal(20),
        (DAY, "vision", "training"): Decimal(40),
        (DAY, None, "idle"): Decimal(20),
    }
    reconcile(finance_api, "80", training="40", inference="20", idle="20")


def test_spread_idle_reaches_serving_pods_and_their_unit_costs(
    tmp_path: Path, finance_api: APIClient
) -> None:
    IdlePolicy.objects.create(cluster="serve", policy="spread")
    serving_scene(tmp_path)
    attribute()

    # The idle 20 goes to the pool's jobs of the day pro rata to their GPU cost, serving
    # included: chat-0 20 : train-x 40. In units of 10^-12: 20e12 x 20/60 = 6666666666666.67
    # and 20e12 x 40/60 = 13333333333333.33; floors leave 1 unit, which goes to the larger
    # remainder (chat-0's .67): 6.666666666667 and 13.333333333333.
    chat = JobRecord.objects.get(job_id="serve/chat-0")
    train = JobRecord.objects.get(job_id="vision/train-x")
    assert sums(lambda r: r.job_id, category="idle") == {
        chat.pk: Decimal("6.666666666667"), train.pk: Decimal("13.333333333333"),
    }  # fmt: skip
    cost = EndpointCost.objects.get(endpoint="chat", day=DAY)
    # Cost 20 + 6.666666666667 = 26.666666666667.
    #   $/1k requests: 26.666666666667 x 1000 / 4000 = 6.66666666666675 -> 6.666666666667
    #   $/1M tokens: 26.666666666667 / 2 = 13.3333333333335, a tie at 12 places: half-even
    #   rounds to the even 13.333333333334.
    assert cost.cost == Decimal("26.666666666667")
    assert cost.cost_per_1k_requests == Decimal("6.666666666667")
    assert cost.cost_per_1m_tokens == Decimal("13.333333333334")
    # The node's cost still counts the idle moved onto its jobs: 60 + 20 = 80, idle 20.
    assert (cost.node_cost, cost.node_idle_cost, cost.idle_share) == (80, 20, Decimal("0.25"))
    reconcile(finance_api, "80", training="40", inference="20", idle="20")


# --- largest remainder ------------------------------------------------------------------------


def test_three_equal_shares_of_a_cent_sum_exactly(tmp_path: Path, finance_api: APIClient) -> None:
    SharedCostRule.objects.create(name="fees", service_name="Cloud Monitoring", method="even")
    hour = (utc(10), utc(11))
    ingest_bill(tmp_path, [
        # a2-highgpu-1g: one A100.
        line("0.01", *hour, node="tiny-1", instance="a2-highgpu-1g", provider="Google Cloud",
             account="billing-1", service="Compute Engine"),
        line("0.01", *hour, provider="Google Cloud", account="billing-1", category="Other",
             service="Cloud Monitoring"),
    ])  # fmt: skip
    shared = {"nvidia.com/gpu.shared": "1"}
    ingest_pods(
        tmp_path, "ts",
        pod("p", "alpha", "tiny-1", shared, utc(10), utc(11)),
        pod("q", "beta", "tiny-1", shared, utc(10), utc(11)),
        pod("r", "gamma", "tiny-1", shared, utc(10), utc(11)),
        replicas=3,
    )  # fmt: skip
    attribute()

    # Each pod holds 1 of 3 time-sliced replicas of the node's one GPU: exactly 1/3 each, no
    # idle. 0.01 = 10^10 units of 10^-12: 10^10 / 3 = 3333333333 rest 1 each, the one unit
    # left goes to the first of the tied remainders (lowest job id):
    # 0.003333333334 + 0.003333333333 + 0.003333333333 = 0.01.
    first_job = min(JobRecord.objects.values_list("pk", flat=True))
    training = sums(lambda r: r.job_id, category="training")
    assert training == {
        pk: Decimal("0.003333333334") if pk == first_job else Decimal("0.003333333333")
        for pk in JobRecord.objects.values_list("pk", flat=True)
    }
    # The shared line, even among the three teams: the same split, the unit to the lowest team id.
    first_team = min(Team.objects.values_list("pk", flat=True))
    assert sums(lambda r: r.team_id, category="shared") == {
        pk: Decimal("0.003333333334") if pk == first_team else Decimal("0.003333333333")
        for pk in Team.objects.values_list("pk", flat=True)
    }
    assert sum(training.values()) == Decimal("0.01")
    reconcile(finance_api, "0.02", training="0.01", shared="0.01")
