"""EndpointCost rollup: the ledger rows of an endpoint's pods joined with its usage per day;
$/1k requests, $/1M tokens and idle share computed by hand from rows created directly."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing_ingest.models import ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost, Category
from finops.inference.models import EndpointCost, InferenceUsage
from finops.inference.selectors import endpoint_month_totals, usage_without_cost
from finops.inference.services import endpoint_costs_rebuild, unit_cost
from finops.org.models import Team
from tests.factories import MONTH, AllocatedCostFactory, ImportBatchFactory, JobRecordFactory

UTC = dt.UTC
DAY = dt.date(2025, 9, 3)
DAY2 = dt.date(2025, 9, 4)

pytestmark = pytest.mark.django_db


def pod(name: str, node: str, endpoint: str = "") -> JobRecord:
    return JobRecordFactory.create(
        cluster="k8s-east", job_id=f"serve/{name}", name=name, namespace="serve",
        endpoint=endpoint, nodes=[node], gpus=Decimal(1), run_id=name,
    )  # fmt: skip


def usage(endpoint: str, at: dt.datetime, *, requests: int, prompt: int = 0,
          generation: int = 0, cluster: str = "k8s-east", pod_name: str = "",
          namespace: str = "") -> InferenceUsage:  # fmt: skip
    batch = ImportBatchFactory.create(kind="inference", format="csv", source=cluster)
    return InferenceUsage.objects.create(
        batch=batch, cluster=cluster, endpoint=endpoint, pod=pod_name, namespace=namespace,
        window_start=at,
        window_end=at + dt.timedelta(hours=1), requests=requests, prompt_tokens=prompt,
        generation_tokens=generation,
    )  # fmt: skip


@pytest.fixture
def ledger(team: Team) -> dict[str, JobRecord]:
    chat0, chat1 = pod("chat-0", "node-a", "chat"), pod("chat-1", "node-b", "chat")
    trainer = pod("trainer", "node-a")
    embed = pod("embed-0", "node-c", "embed")

    def row(
        amount: str, *, job: JobRecord | None = None, node: str = "",
        category: str = Category.TRAINING, day: dt.date = DAY, seconds: int = 0,
    ) -> AllocatedCost:  # fmt: skip
        return AllocatedCostFactory.create(
            team=team, day=day, job=job, node=node, category=category,
            amount=Decimal(amount), gpu_seconds=Decimal(seconds),
            run_id=job.run_id if job else "",
        )  # fmt: skip

    row("30.00", job=chat0, node="node-a", seconds=7200)
    row("20.50", job=chat1, node="node-b", seconds=3600)
    row("40.00", job=trainer, node="node-a", seconds=14400)
    row("10.00", node="node-a", category=Category.IDLE)
    row("4.50", node="node-b", category=Category.IDLE)
    # Idle the `spread` policy moved onto chat-1 (no node, the job's team and id).
    row("2.00", job=chat1, category=Category.IDLE)
    row("5.00", job=embed, node="node-c", seconds=3600)
    row("12.50", job=chat0, node="node-a", day=DAY2, seconds=3600)
    row("99.00", category=Category.UNALLOCATED)
    return {"chat0": chat0, "chat1": chat1, "trainer": trainer, "embed": embed}


def at(day: dt.date, hour: int) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(hour), UTC)


def test_endpoint_cost_joins_ledger_and_usage_per_day(ledger: dict[str, JobRecord]) -> None:
    usage("chat", at(DAY, 10), requests=3000, prompt=600_000, generation=1_500_000)
    usage("chat", at(DAY, 23), requests=2000, prompt=400_000, generation=1_000_000,
          cluster="k8s-west")  # fmt: skip
    usage("chat", at(DAY2 + dt.timedelta(days=5), 1), requests=77)  # a day without cost
    usage("chat", at(dt.date(2025, 10, 1), 0), requests=88)  # another month

    written = endpoint_costs_rebuild(month=DAY)

    assert written == 3
    chat = EndpointCost.objects.get(endpoint="chat", day=DAY)
    cost = Decimal("30.00") + Decimal("20.50") + Decimal("2.00")
    requests, tokens = 3000 + 2000, 600_000 + 1_500_000 + 400_000 + 1_000_000
    assert chat.billing_period == MONTH
    assert chat.cost == cost
    assert chat.gpu_seconds == Decimal(7200 + 3600)
    assert chat.pods == 2
    assert (chat.requests, chat.tokens) == (requests, tokens)
    assert (chat.prompt_tokens, chat.generation_tokens) == (1_000_000, 2_500_000)
    # 52.50 x 1000 / 5000 and 52.50 x 10^6 / 3.5 x 10^6: exact.
    assert chat.cost_per_1k_requests == Decimal("10.5")
    assert chat.cost_per_1k_requests == cost * 1000 / requests
    assert chat.cost_per_1m_tokens == Decimal("15")

    # Serving nodes a and b: everything on them that day, plus idle spread onto their jobs.
    node_cost = (Decimal("30") + Decimal("40") + Decimal("10")) + (
        Decimal("20.50") + Decimal("4.50")
    ) + Decimal("2.00")  # fmt: skip
    node_idle = Decimal("10") + Decimal("4.50") + Decimal("2.00")
    assert (chat.node_cost, chat.node_idle_cost) == (node_cost, node_idle)
    assert chat.idle_share == (node_idle / node_cost).quantize(
        Decimal("0.000001"), rounding=ROUND_HALF_EVEN
    )


def test_no_usage_gives_no_unit_cost_and_no_idle_gives_zero_share(
    ledger: dict[str, JobRecord],
) -> None:
    endpoint_costs_rebuild(month=MONTH)

    day2 = EndpointCost.objects.get(endpoint="chat", day=DAY2)
    assert day2.cost == Decimal("12.50")
    assert (day2.requests, day2.tokens) == (0, 0)
    assert day2.cost_per_1k_requests is None
    assert day2.cost_per_1m_tokens is None
    assert day2.idle_share == Decimal(0)
    embed = EndpointCost.objects.get(endpoint="embed")
    assert (embed.cost, embed.node_cost, embed.idle_share) == (Decimal(5), Decimal(5), Decimal(0))


def test_triton_requests_without_tokens(ledger: dict[str, JobRecord]) -> None:
    usage("embed", at(DAY, 9), requests=3)

    endpoint_costs_rebuild(month=MONTH)

    embed = EndpointCost.objects.get(endpoint="embed")
    # 5 x 1000 / 3 = 1666.666... rounded half-even to 12 places.
    assert embed.cost_per_1k_requests == Decimal("1666.666666666667")
    assert embed.cost_per_1m_tokens is None


def test_rebuild_is_idempotent_and_replaces_the_month(ledger: dict[str, JobRecord]) -> None:
    usage("chat", at(DAY, 10), requests=1000)
    first = endpoint_costs_rebuild(month=MONTH)
    snapshot = list(EndpointCost.objects.order_by("day", "endpoint").values())
    other_month = EndpointCost.objects.create(
        billing_period=dt.date(2025, 10, 1), day=dt.date(2025, 10, 2), endpoint="chat",
        billing_currency="USD", cost=Decimal(1),
    )  # fmt: skip

    again = endpoint_costs_rebuild(month=MONTH)

    assert again == first
    rows = list(EndpointCost.objects.filter(billing_period=MONTH).order_by("day", "endpoint"))
    assert [(r.day, r.endpoint, r.cost, r.requests) for r in rows] == [
        (s["day"], s["endpoint"], s["cost"], s["requests"]) for s in snapshot
    ]
    assert EndpointCost.objects.filter(pk=other_month.pk).exists()

    # Re-attribution changed the ledger: the rebuild follows it.
    ledger["chat0"].allocatedcost_set.filter(day=DAY).update(amount=Decimal("31.00"))
    endpoint_costs_rebuild(month=MONTH)
    chat = EndpointCost.objects.get(endpoint="chat", day=DAY)
    assert chat.cost == Decimal("31.00") + Decimal("20.50") + Decimal("2.00")
    assert chat.cost_per_1k_requests == chat.cost


def test_currencies_are_separate_rows(ledger: dict[str, JobRecord], team: Team) -> None:
    AllocatedCostFactory.create(
        team=team, day=DAY, job=ledger["embed"], node="node-eu", amount=Decimal("3"),
        billing_currency="EUR", provider_name="Azure",
    )  # fmt: skip
    usage("embed", at(DAY, 9), requests=1000)

    endpoint_costs_rebuild(month=MONTH)

    rows = {r.billing_currency: r for r in EndpointCost.objects.filter(endpoint="embed")}
    assert (rows["USD"].cost, rows["EUR"].cost) == (Decimal(5), Decimal(3))
    assert rows["EUR"].requests == rows["USD"].requests == 1000
    assert rows["EUR"].cost_per_1k_requests == Decimal(3)


def test_month_totals_and_usage_without_cost(ledger: dict[str, JobRecord]) -> None:
    usage("chat", at(DAY, 10), requests=4000)
    usage("chat", at(DAY2, 10), requests=1000)
    usage("unlabelled", at(DAY, 10), requests=10)
    endpoint_costs_rebuild(month=MONTH)

    totals = {t.endpoint: t for t in endpoint_month_totals(month=MONTH)}

    chat = totals["chat"]
    assert chat.cost == Decimal("52.50") + Decimal("12.50")
    assert chat.requests == 5000
    assert chat.cost_per_1k_requests == Decimal("13")
    assert usage_without_cost(month=MONTH) == [(DAY, "unlabelled")]


def test_empty_month_writes_nothing() -> None:
    assert endpoint_costs_rebuild(month=dt.date(2024, 1, 15)) == 0
    assert not EndpointCost.objects.exists()
    assert not ImportBatch.objects.exists()


def test_a_month_with_no_endpoint_job_does_not_read_the_ledger(team: Team) -> None:
    trainer = pod("trainer", "node-a")
    AllocatedCostFactory.create(team=team, day=DAY, job=trainer, node="node-a",
                                run_id="trainer", amount=Decimal("40.00"))  # fmt: skip
    with CaptureQueriesContext(connection) as queries:
        assert endpoint_costs_rebuild(month=MONTH) == 0
    assert not [q for q in queries.captured_queries if "attribution_allocatedcost" in q["sql"]]


def test_unit_cost_rounds_half_even() -> None:
    assert unit_cost(Decimal("10"), 3, 1000) == Decimal("3333.333333333333")
    assert unit_cost(Decimal("1"), 0, 1000) is None


@pytest.mark.django_db
def test_attributing_a_month_rebuilds_its_endpoint_costs(monkeypatch: pytest.MonkeyPatch) -> None:
    # The pipeline's step after attribution rebuilds the month's endpoint costs from the ledger.
    from django.core.management import call_command

    from finops.inference import month_step

    months = []
    monkeypatch.setattr(month_step, "endpoint_costs_rebuild", lambda *, month: months.append(month))
    call_command("attribute", "--month", "2025-09")
    assert months == [dt.date(2025, 9, 1)]


def test_an_endpoint_of_two_teams_has_a_row_per_team(
    ledger: dict[str, JobRecord], team: Team, other_team: Team
) -> None:
    # A Speech pod behind `chat` on node-a, 1 GPU-hour that day (Vision's chat pods hold 3).
    speech_pod = pod("chat-speech", "node-a", "chat")
    AllocatedCostFactory.create(
        team=other_team, day=DAY, job=speech_pod, node="node-a", amount=Decimal("7.00"),
        gpu_seconds=Decimal(3600), category=Category.INFERENCE,
    )  # fmt: skip
    # 100 requests naming Speech's pod; 1001 naming none: split 3 : 1 by GPU-seconds.
    usage("chat", at(DAY, 10), requests=100, prompt=40, pod_name="chat-speech", namespace="serve")
    usage("chat", at(DAY, 11), requests=1001, generation=10)

    endpoint_costs_rebuild(month=MONTH)

    rows = {r.team_id: r for r in EndpointCost.objects.filter(endpoint="chat", day=DAY)}
    assert set(rows) == {team.pk, other_team.pk}
    vision, speech = rows[team.pk], rows[other_team.pk]
    assert vision.cost == Decimal("30.00") + Decimal("20.50") + Decimal("2.00")
    assert speech.cost == Decimal("7.00")
    # 1001 x 3/4 = 750.75 and 1001 x 1/4 = 250.25: floors 750 + 250 leave 1, to the larger
    # remainder (Vision's .75). Tokens 10: 7.5 and 2.5, a tie: the earlier team (Vision).
    assert (vision.requests, speech.requests) == (751, 100 + 250)
    assert (vision.generation_tokens, speech.generation_tokens) == (8, 2)
    assert (vision.prompt_tokens, speech.prompt_tokens) == (0, 40)
    assert speech.cost_per_1k_requests == Decimal("7.00") * 1000 / 350
