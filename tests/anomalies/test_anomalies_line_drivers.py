"""SKU and resource drivers, traced from the ledger back to the bill's line items.

The scenario is a FOCUS bill of October 2025 ingested by the command (which runs attribution
and detection): team vision's line (tag team=vision) bills SKU-A on resource i-a every day at
100 USD times a 5-day wiggle; on 29 October a new SKU-B on resource i-b costs 500 USD more.
Vision also has a monthly line (SKU-M on vol-m, 31 USD for the month: 1 USD a day once spread
over its charge period). Team speech has its own line in the same account and service (SKU-C
on i-c, 300 USD a day), which must never appear among vision's drivers. Hand-worked: on the
event day SKU-B (i-b) has actual 500, expected 0 (it has no baseline), delta 500; SKU-A and
SKU-M have their day's actual (the wiggled 100, and 1) and share the expected between them.
So the drivers of each dimension add up to the impact with nothing left.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from finops.anomalies.line_drivers import UNTRACED, Line, row_pieces, split_signed
from finops.anomalies.models import Anomaly
from finops.anomalies.series import TeamRow
from finops.org.models import Team
from tests.builders import focus_row, write_focus_csv

pytestmark = pytest.mark.django_db

D = Decimal
WIGGLE = [D("1.00"), D("1.03"), D("0.98"), D("1.02"), D("0.97")]
EVENT_DAY = dt.date(2025, 10, 29)
NEW_SKU_COST = D("500.00")


def _line(
    day: dt.date, sku: str, resource: str, team: str, cost: Decimal, days: int = 1
) -> dict[str, str]:
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    end = start + dt.timedelta(days=days)
    return focus_row(
        BillingPeriodStart="2025-10-01T00:00:00Z", BillingPeriodEnd="2025-11-01T00:00:00Z",
        ChargePeriodStart=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        ChargePeriodEnd=end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        ServiceName="Amazon Simple Storage Service", SkuId=sku, ResourceId=resource,
        ResourceName="", ListCost=str(cost), BilledCost=str(cost), EffectiveCost=str(cost),
        Tags=json.dumps({"team": team}),
    )  # fmt: skip


def vision_cost(day: dt.date) -> Decimal:
    return D(100) * WIGGLE[(day.day - 1) % 5]


def write_bill(tmp_path: Path) -> Path:
    rows = [_line(dt.date(2025, 10, 1), "SKU-M", "vol-m", "vision", D("31.00"), days=31)]
    for i in range(31):
        day = dt.date(2025, 10, 1) + dt.timedelta(days=i)
        rows.append(_line(day, "SKU-A", "i-a", "vision", vision_cost(day)))
        rows.append(_line(day, "SKU-C", "i-c", "speech", D("300.00")))
        if day == EVENT_DAY:
            rows.append(_line(day, "SKU-B", "i-b", "vision", NEW_SKU_COST))
    return write_focus_csv(tmp_path / "bill.csv", rows)


def _by(anomaly: Anomaly, dimension: str) -> dict[str, tuple[Decimal, Decimal, Decimal]]:
    return {
        d.key: (d.actual, d.expected, d.delta) for d in anomaly.drivers.filter(dimension=dimension)
    }


def test_a_new_sku_is_the_sku_and_resource_driver_of_the_jump(
    team: Team, other_team: Team, tmp_path: Path
) -> None:
    call_command("ingest_billing", "--format", "focus", str(write_bill(tmp_path)))

    anomaly = Anomaly.objects.get(team=team)
    assert (anomaly.first_day, anomaly.last_day) == (EVENT_DAY, EVENT_DAY)
    assert anomaly.actual == vision_cost(EVENT_DAY) + D(1) + NEW_SKU_COST

    skus = _by(anomaly, "sku")
    assert set(skus) == {"SKU-A", "SKU-B", "SKU-M"}
    assert skus["SKU-B"] == (NEW_SKU_COST, D(0), NEW_SKU_COST)
    assert skus["SKU-A"][0] == vision_cost(EVENT_DAY)
    assert skus["SKU-M"][0] == D(1)
    assert skus["SKU-A"][1] + skus["SKU-M"][1] == anomaly.expected
    # The old SKUs are expected at about their baseline: 1 a day for the monthly line.
    assert abs(skus["SKU-M"][1] - 1) < D("0.05")
    # Largest first, and within the dimension they add up to the impact exactly.
    largest = anomaly.drivers.filter(dimension="sku").first()
    assert largest is not None
    assert largest.key == "SKU-B"
    assert sum(d[2] for d in skus.values()) + anomaly.unexplained_sku == anomaly.impact
    assert anomaly.unexplained_sku == 0

    resources = _by(anomaly, "resource")
    assert resources == {
        "i-b": skus["SKU-B"], "i-a": skus["SKU-A"], "vol-m": skus["SKU-M"]
    }  # fmt: skip
    assert anomaly.unexplained_resource == 0
    # Speech's line shares vision's account and service, and is not vision's cost.
    keys = {d.key for d in anomaly.drivers.all()}
    assert not keys & {"SKU-C", "i-c"}
    # The usage breakdown still adds up on its own.
    usage = [d for d in anomaly.drivers.all() if d.dimension not in ("sku", "resource")]
    assert sum(d.delta for d in usage) + anomaly.unexplained == anomaly.impact

    # A second run (the same ledger and bill) changes nothing.
    before = list(anomaly.drivers.values_list("dimension", "key", "actual", "expected"))
    call_command("detect_anomalies", "--since", "2025-10-01")
    anomaly.refresh_from_db()
    after = list(anomaly.drivers.values_list("dimension", "key", "actual", "expected"))
    assert after == before


def test_a_ledger_without_its_line_items_is_unexplained_not_invented(team: Team) -> None:
    """Ledger rows no line item matches are counted, never a driver: all rest."""
    row = TeamRow(team.pk, EVENT_DAY, "", "tagged", (1, "AWS", "a", "", "S3", "", "USD"), D(7))
    assert row_pieces(row, [], set()) == {(UNTRACED, UNTRACED): D(7)}


def _row(node: str, category: str, amount: str, team_id: int = 1) -> TeamRow:
    return TeamRow(team_id, EVENT_DAY, node, category, (1, "AWS", "a", "", "EC2", "", "USD"),
                   D(amount))  # fmt: skip


LINES = [
    # A GPU node billed on two SKUs (2:1 that day), a tagged line of team 1, one of team 2,
    # and a line nobody owns.
    Line(D("20"), "p5.48xlarge", "i-node", frozenset({"gpu-1", "i-node"}), 1),
    Line(D("10"), "ebs-gp3", "i-node", frozenset({"gpu-1", "i-node"}), 1),
    Line(D("5"), "t3.large", "i-cpu", frozenset({"i-cpu"}), 1),
    Line(D("5"), "t3.large", "i-other", frozenset({"i-other"}), 2),
    Line(D("4"), "nat", "nat-1", frozenset({"nat-1"}), None),
]


def test_a_node_share_is_split_over_that_nodes_line_items_pro_rata() -> None:
    # A job's share of gpu-1 that day: 9 over the node's SKUs 20:10 -> 6 and 3.
    pieces = row_pieces(_row("gpu-1", "training", "9"), LINES, {"gpu-1"})
    assert pieces == {("p5.48xlarge", "i-node"): D(6), ("ebs-gp3", "i-node"): D(3)}


def test_tagged_and_shared_rows_take_only_their_own_lines() -> None:
    # Team 1's tagged row: its own non-node line only (not the node, not team 2's line).
    assert row_pieces(_row("", "tagged", "5"), LINES, {"gpu-1"}) == {("t3.large", "i-cpu"): D(5)}
    # A shared row: the unowned line only.
    assert row_pieces(_row("", "shared", "1.5"), LINES, {"gpu-1"}) == {("nat", "nat-1"): D("1.5")}


def test_signed_split_adds_up_exactly() -> None:
    # 10 over weights 1:1:1 -> 3.333...; the last unit of 10^-12 goes to the first.
    parts = split_signed(D(10), [D(1), D(1), D(1)])
    assert parts is not None
    assert sum(parts) == D(10)
    assert parts[0] - parts[1] == D("1e-12")
    # A credit among the lines keeps its sign: 8 over (10, -2) -> 10 and -2.
    assert split_signed(D(8), [D(10), D(-2)]) == [D(10), D(-2)]
    assert split_signed(D(1), [D(1), D(-1)]) is None


SACCT_HEADER = (
    "JobID|JobIDRaw|JobName|Account|User|Partition|State|Start|End|AllocTRES|NodeList|WCKey|Comment"
)


def _node_day(day: dt.date, node: str, resource: str, cost: Decimal) -> dict[str, str]:
    row = _line(day, "p5.48xlarge", resource, "vision", cost)
    row.update(ServiceName="Amazon EC2", ResourceName=node, x_InstanceType="p5.48xlarge")
    return row


NODE_DAY = D("2359.68")  # 24 h x 98.32


def test_a_new_gpu_node_is_the_resource_driver_and_its_run_the_usage_driver(
    team: Team, tmp_path: Path
) -> None:
    """GPU node gpu-001 (i-1, billed daily at NODE_DAY x the wiggle, tag team=vision) runs
    vision's run-a on 4 of its 8 GPUs all month (the idle half is vision's, the line's owner).
    On 29 October a second node gpu-002 (i-2, NODE_DAY) runs run-b on all 8 GPUs. Both bill
    the same SKU. Hand-worked: resource i-2 actual NODE_DAY, expected 0; i-1 has the day's
    actual of gpu-001 and all of the expected; the one SKU carries the whole impact."""
    rows = []
    for i in range(31):
        day = dt.date(2025, 10, 1) + dt.timedelta(days=i)
        rows.append(_node_day(day, "gpu-001", "i-1", NODE_DAY * WIGGLE[i % 5]))
    rows.append(_node_day(EVENT_DAY, "gpu-002", "i-2", NODE_DAY))
    columns = [*rows[0]]
    bill = write_focus_csv(tmp_path / "bill.csv", rows, columns)
    jobs = tmp_path / "jobs.sacct"
    jobs.write_text(
        SACCT_HEADER + "\n"
        "1|1|train|vision|ana|gpu|COMPLETED|2025-10-01T00:00:00|2025-11-01T00:00:00|"
        "billing=8,gres/gpu=4,node=1|gpu-001|run-a|\n"
        "2|2|train|vision|ana|gpu|COMPLETED|2025-10-29T00:00:00|2025-10-30T00:00:00|"
        "billing=8,gres/gpu=8,node=1|gpu-002|run-b|\n"
    )
    call_command("ingest_jobs", "--format", "slurm", str(jobs), "--cluster", "c1")
    call_command("ingest_billing", "--format", "focus", str(bill))

    anomaly = Anomaly.objects.get(team=team)
    assert (anomaly.first_day, anomaly.last_day) == (EVENT_DAY, EVENT_DAY)
    first_node_day = NODE_DAY * WIGGLE[28 % 5]
    assert anomaly.actual == first_node_day + NODE_DAY
    usage = _by(anomaly, "run")
    assert usage["run-b"] == (NODE_DAY, D(0), NODE_DAY)

    assert _by(anomaly, "resource") == {
        "i-2": (NODE_DAY, D(0), NODE_DAY),
        "i-1": (first_node_day, anomaly.expected, first_node_day - anomaly.expected),
    }
    assert _by(anomaly, "sku") == {
        "p5.48xlarge": (anomaly.actual, anomaly.expected, anomaly.impact),
    }
    assert anomaly.unexplained_sku == anomaly.unexplained_resource == 0


def test_the_api_shows_each_dimension_and_its_rest(
    team: Team, other_team: Team, finance_user: User, tmp_path: Path
) -> None:
    from rest_framework.test import APIClient

    call_command("ingest_billing", "--format", "focus", str(write_bill(tmp_path)))
    api = APIClient()
    api.force_authenticate(finance_user)
    [item] = api.get("/api/v1/anomalies/", {"team": "vision"}).json()["results"]
    impact = D(item["impact"])
    for dimension, rest in (("sku", "unexplained_sku"), ("resource", "unexplained_resource")):
        deltas = [D(d["delta"]) for d in item["drivers"] if d["dimension"] == dimension]
        assert deltas
        assert sum(deltas) + D(item[rest]) == impact
    usage = [D(d["delta"]) for d in item["drivers"] if d["dimension"] not in ("sku", "resource")]
    assert sum(usage) + D(item["unexplained"]) == impact


def test_the_page_and_email_show_each_breakdown_with_its_rest(
    team: Team, other_team: Team, lead_user: User, tmp_path: Path, client: Client
) -> None:
    call_command("ingest_billing", "--format", "focus", str(write_bill(tmp_path)))
    anomaly = Anomaly.objects.get(team=team)
    client.force_login(lead_user)
    page = client.get(f"/anomalies/{anomaly.pk}/").content.decode()
    for testid in ("drivers", "drivers-by-sku", "drivers-by-resource"):
        assert f'data-testid="{testid}"' in page
    by_sku = page[page.index('data-testid="drivers-by-sku"') :]
    by_sku = by_sku[: by_sku.index("</table>")]
    assert "SKU-B" in by_sku
    assert "i-b" not in by_sku
    assert "Unexplained" in by_sku


def test_a_new_sku_on_a_teams_own_node_is_a_new_cost_source(team: Team) -> None:
    """New cost sources trace a team's own node to its line items' SKUs per day (review
    defect 4), as the SKU drivers do: a second SKU billed on the node from day 30 is a new
    source with its own part of the node's cost. (Taking one SKU of the node's lines for the
    whole window saw no new SKU at all.)"""
    from billing_ingest.models import CostLineItem, ImportBatch
    from finops.anomalies.services import anomalies_detect
    from finops.attribution.models import AllocatedCost, Category

    start = dt.date(2025, 8, 1)
    batch = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    dims = dict(provider_name="AWS", billing_account_id="1", sub_account_id="",
                service_name="Amazon EC2", pricing_category="Standard",
                billing_currency="USD")  # fmt: skip
    for i in range(40):
        day = start + dt.timedelta(days=i)
        begin = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
        skus = [("BoxUsage:p5.48xlarge", D(1000))]
        if i >= 30:
            skus.append(("EBS:VolumeUsage.gp3", D(50)))
        for sku, cost in skus:
            CostLineItem.objects.create(
                batch=batch, source="s", billing_period=day.replace(day=1),
                billing_period_start=begin, charge_period_start=begin,
                charge_period_end=begin + dt.timedelta(days=1), charge_category="Usage",
                resource_name="gpu-n9", sku_id=sku, billed_cost=cost, effective_cost=cost,
                **dims,
            )  # fmt: skip
        # The team keeps the node's idle capacity (no jobs): the ledger row of the whole node.
        AllocatedCost.objects.create(
            billing_period=day.replace(day=1), day=day, category=Category.IDLE, team=team,
            node="gpu-n9", source_batch=batch, amount=sum((c for _, c in skus), D(0)), **dims,
        )  # fmt: skip
    anomalies_detect(since=start + dt.timedelta(days=20))
    anomaly = Anomaly.objects.get(kind="new_source")
    assert anomaly.first_day == start + dt.timedelta(days=30)
    [driver] = anomaly.drivers.all()
    assert (driver.dimension, driver.key) == ("sku", "EBS:VolumeUsage.gp3")
    # Its part of the node's rows over its first 7 days: 50 a day.
    assert driver.actual == D(50) * 7 == anomaly.impact
