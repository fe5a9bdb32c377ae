"""The attribution engine on hand-computed cases (DESIGN section 5). No database."""

from __future__ import annotations

import calendar
import datetime as dt
from collections import defaultdict
from decimal import Decimal

import pytest

from finops.attribution import engine
from finops.attribution.engine import (
    IDLE,
    TAGGED,
    TRAINING,
    UNALLOCATED,
    Job,
    LineItem,
    Share,
    allocate,
    largest_remainder,
    match_node,
    node_name_map,
)
from finops.attribution.models import Category, SharedCostRule
from finops.core.money import MONEY_PLACES

BASE = calendar.timegm(dt.datetime(2025, 6, 1).timetuple())  # 2025-06-01 00:00 UTC
DAY1 = BASE // 86400


def at(hours: float) -> int:
    """Epoch seconds, `hours` after 2025-06-01 00:00 UTC."""
    return BASE + int(hours * 3600)


def job(
    pk: int, nodes: list[str], gpus: str, start: float, end: float | None, team: int = 1
) -> Job:
    return Job(
        id=pk,
        nodes=tuple(nodes),
        start=at(start),
        end=None if end is None else at(end),
        gpu_micros=engine.gpu_micros(Decimal(gpus)),
        team_id=team,
    )


def node_line(
    pk: int, node: str, cost: str, start: float, end: float, gpus: int | None = 8
) -> LineItem:
    return LineItem(id=pk, start=at(start), end=at(end), cost=Decimal(cost), node=node, gpus=gpus)


def by_owner(shares: list[Share]) -> dict[object, Decimal]:
    """Amount per job id, with idle under 'idle'."""
    totals: dict[object, Decimal] = defaultdict(Decimal)
    for share in shares:
        totals[share.job_id if share.category == TRAINING else share.category] += share.amount
    return dict(totals)


def line_sums(shares: list[Share]) -> dict[int, Decimal]:
    totals: dict[int, Decimal] = defaultdict(Decimal)
    for share in shares:
        totals[share.line_id] += share.amount
    return dict(totals)


def test_constants_match_models() -> None:
    assert engine.MONEY_PLACES == MONEY_PLACES
    assert {engine.TRAINING, engine.TAGGED, engine.IDLE, engine.UNALLOCATED} <= set(Category.values)
    assert {engine.SHARED, engine.INFERENCE} <= set(Category.values)
    assert {engine.EVEN, engine.GPU_SPEND, engine.FIXED} == set(SharedCostRule.Method.values)


def test_two_jobs_share_an_8_gpu_node_for_one_hour() -> None:
    # $98.32 for one hour of an 8-GPU node = 8 x 3600 GPU-seconds.
    # Job 1: 4 GPUs x 3600 s -> 98.32 x 14400 / 28800 = 49.16
    # Job 2: 2 GPUs x 1800 s -> 98.32 x  3600 / 28800 = 12.29
    # Idle: 98.32 - 49.16 - 12.29 = 36.87
    shares = allocate(
        [node_line(1, "n1", "98.32", 0, 1)],
        [job(10, ["n1"], "4", 0, 1), job(11, ["n1"], "2", 0.25, 0.75)],
    )
    assert by_owner(shares) == {10: Decimal("49.16"), 11: Decimal("12.29"), IDLE: Decimal("36.87")}
    gpu_seconds = {s.job_id: s.gpu_seconds for s in shares if s.job_id}
    assert gpu_seconds == {10: 4 * 3600, 11: 2 * 1800}
    idle = next(s for s in shares if s.category == IDLE)
    assert (idle.node, idle.team_id, idle.job_id, idle.day) == ("n1", None, None, DAY1)
    assert {s.team_id for s in shares if s.job_id} == {1}


def test_mig_slices_are_exact_sevenths_of_a_gpu() -> None:
    # A 3g slice holds 3/7 of one GPU: no decimal holds that, so the job carries a denominator.
    # $56 hour of an 8-GPU node: 3g pod the whole hour = 56 x (3/7) / 8 = 3; 1g pod half an hour
    # = 56 x (1/7 x 0.5) / 8 = 0.5; idle = 52.5. With micro-GPUs (0.428571) the 3g share
    # would come out as 2.999997.
    three_g = Job(id=10, nodes=("n1",), start=at(0), end=at(1), team_id=1,
                  gpu_micros=3 * engine.GPU_SCALE, gpu_denominator=7)  # fmt: skip
    one_g = Job(id=11, nodes=("n1",), start=at(0), end=at(0.5), team_id=1,
                gpu_micros=engine.GPU_SCALE, gpu_denominator=7)  # fmt: skip
    shares = allocate([node_line(1, "n1", "56", 0, 1)], [three_g, one_g])
    assert by_owner(shares) == {10: Decimal("3"), 11: Decimal("0.5"), IDLE: Decimal("52.5")}


def test_job_spanning_two_hours_and_two_nodes() -> None:
    # 8 GPUs in total over 2 nodes = 4 per node, from 00:30 to 01:30: in each of the four
    # node-hours it holds 4 GPUs x 1800 s = 1/4 of an 8-GPU hour.
    lines = [
        node_line(1, "n1", "10", 0, 1),
        node_line(2, "n1", "10", 1, 2),
        node_line(3, "n2", "20", 0, 1),
        node_line(4, "n2", "20", 1, 2),
    ]
    shares = allocate(lines, [job(7, ["n1", "n2"], "8", 0.5, 1.5)])
    job_per_line = {s.line_id: s.amount for s in shares if s.job_id == 7}
    assert job_per_line == {1: Decimal("2.5"), 2: Decimal("2.5"), 3: Decimal(5), 4: Decimal(5)}
    assert by_owner(shares) == {7: Decimal(15), IDLE: Decimal(45)}
    # GPU-seconds: 8 GPUs x 3600 s in all, 4 x 1800 per node-hour.
    assert sum(s.gpu_seconds for s in shares if s.job_id == 7) == 8 * 3600
    assert {s.node for s in shares if s.job_id == 7} == {"n1", "n2"}


def test_whole_hour_lines_and_part_hour_lines_see_the_same_overlaps() -> None:
    # 8 GPUs from 00:15 to 03:45 on an 8-GPU node at $36 an hour. Hourly lines take each
    # job's overlap of the whole hour from the index (2700, 3600, 3600, 2700 s); half-hour
    # lines cut it themselves (900 + 1800, 1800 + 1800, ..., 1800 + 900).
    run = [job(1, ["n1"], "8", 0.25, 3.75)]
    hourly = allocate([node_line(h + 1, "n1", "36", h, h + 1) for h in range(4)], run)
    assert {s.line_id: s.amount for s in hourly if s.job_id == 1} == {
        1: Decimal(27), 2: Decimal(36), 3: Decimal(36), 4: Decimal(27),
    }  # fmt: skip
    halves = [node_line(h + 1, "n1", "18", h / 2, h / 2 + 0.5) for h in range(8)]
    half_hourly = allocate(halves, run)
    assert [s.amount for s in half_hourly if s.job_id == 1] == [
        Decimal(9), *[Decimal(18)] * 6, Decimal(9),
    ]  # fmt: skip
    for shares in (hourly, half_hourly):
        assert by_owner(shares) == {1: Decimal(126), IDLE: Decimal(18)}
        assert sum(s.gpu_seconds for s in shares if s.job_id == 1) == 8 * 3.5 * 3600


def test_gpus_split_across_nodes_may_be_fractional() -> None:
    # 3 GPUs over 2 nodes = 1.5 per node; $16 for the hour of an 8-GPU node: 16 x 1.5 / 8 = 3.
    shares = allocate([node_line(1, "n1", "16", 0, 1)], [job(1, ["n1", "n2"], "3", 0, 1)])
    assert by_owner(shares) == {1: Decimal(3), IDLE: Decimal(13)}
    assert shares[0].gpu_seconds == Decimal("1.5") * 3600


def test_node_without_jobs_is_all_idle() -> None:
    shares = allocate([node_line(1, "n1", "50", 0, 1)], [job(1, ["other"], "8", 0, 1)])
    assert by_owner(shares) == {IDLE: Decimal(50)}


def test_job_on_a_node_without_a_bill_costs_nothing() -> None:
    shares = allocate([node_line(1, "n1", "50", 0, 1)], [job(1, ["n9"], "8", 0, 1)])
    assert all(s.job_id is None for s in shares)
    assert line_sums(shares) == {1: Decimal(50)}


def test_daily_line_item_is_spread_over_its_24_hourly_buckets() -> None:
    # $240 for a day of an 8-GPU node = 8 x 86400 GPU-seconds, $10 an hour.
    # Job 1: 4 GPUs from 06:00 to 12:00 -> 240 x (4 x 6h) / (8 x 24h) = 30
    # Job 2: 2 GPUs all day             -> 240 x (2 x 24h) / (8 x 24h) = 60
    # Idle: 240 - 90 = 150
    shares = allocate(
        [node_line(1, "n1", "240", 0, 24)],
        [job(1, ["n1"], "4", 6, 12), job(2, ["n1"], "2", -5, 30)],
    )
    assert by_owner(shares) == {1: Decimal(30), 2: Decimal(60), IDLE: Decimal(150)}
    # The job that ran beyond the line counts only the line's day.
    assert next(s.gpu_seconds for s in shares if s.job_id == 2) == 2 * 86400


def test_line_spanning_midnight_lands_on_both_days() -> None:
    # $48 from 12:00 on day 1 to 12:00 on day 2, one 8-GPU job all along: $24 on each day.
    shares = allocate([node_line(1, "n1", "48", 12, 36)], [job(1, ["n1"], "8", 0, 48)])
    per_day = {s.day: s.amount for s in shares}
    assert per_day == {DAY1: Decimal(24), DAY1 + 1: Decimal(24)}


def test_running_job_is_charged_to_the_end_of_the_charge_period() -> None:
    # Running since 00:15: 8 GPUs x 2700 s of an $80 8-GPU hour = 60; idle 20.
    shares = allocate([node_line(1, "n1", "80", 0, 1)], [job(1, ["n1"], "8", 0.25, None)])
    assert by_owner(shares) == {1: Decimal(60), IDLE: Decimal(20)}


def test_oversubscribed_bucket_is_split_pro_rata_without_idle() -> None:
    # Jobs hold 8 x 3600 + 4 x 1800 = 36000 GPU-seconds of a 28800 capacity:
    # job 1 gets 80 x 28800 / 36000 = 64, job 2 gets 80 x 7200 / 36000 = 16.
    shares = allocate(
        [node_line(1, "n1", "80", 0, 1)],
        [job(1, ["n1"], "8", 0, 1), job(2, ["n1"], "4", 0, 0.5)],
    )
    assert by_owner(shares) == {1: Decimal(64), 2: Decimal(16)}


def test_oversubscription_is_decided_per_bucket() -> None:
    # $100 over two hours = $50 an hour. Hour 0: jobs 1 and 2 both hold 8 GPUs all hour
    # (oversubscribed) -> 25 each. Hour 1: job 1 alone, 8 GPUs for 30 min -> 50 x 1/2 = 25,
    # idle 25. Job 1 = 50, job 2 = 25, idle = 25.
    shares = allocate(
        [node_line(1, "n1", "100", 0, 2)],
        [job(1, ["n1"], "8", 0, 1.5), job(2, ["n1"], "8", 0, 1)],
    )
    assert by_owner(shares) == {1: Decimal(50), 2: Decimal(25), IDLE: Decimal(25)}


def test_credit_line_is_split_with_its_sign() -> None:
    shares = allocate(
        [node_line(1, "n1", "-98.32", 0, 1)],
        [job(10, ["n1"], "4", 0, 1), job(11, ["n1"], "2", 0.25, 0.75)],
    )
    assert by_owner(shares) == {
        10: Decimal("-49.16"),
        11: Decimal("-12.29"),
        IDLE: Decimal("-36.87"),
    }


def test_zero_cost_line_still_records_gpu_seconds() -> None:
    shares = allocate([node_line(1, "n1", "0", 0, 1)], [job(1, ["n1"], "8", 0, 1)])
    assert line_sums(shares) == {1: Decimal(0)}
    assert next(s.gpu_seconds for s in shares if s.job_id == 1) == 8 * 3600


def test_largest_remainder_on_three_equal_shares() -> None:
    # 10 units of 10^-12 over three 1-GPU jobs on a 3-GPU node: 10/3 each does not divide.
    # Floors 3 + 3 + 3 = 9; the missing unit goes to the first of the tied parts (job 1).
    quantum = Decimal(1).scaleb(-MONEY_PLACES)
    jobs = [job(pk, ["n1"], "1", 0, 1) for pk in (1, 2, 3)]
    shares = allocate([node_line(1, "n1", str(10 * quantum), 0, 1, gpus=3)], jobs)
    assert by_owner(shares) == {1: 4 * quantum, 2: 3 * quantum, 3: 3 * quantum}
    credit = allocate([node_line(1, "n1", str(-10 * quantum), 0, 1, gpus=3)], jobs)
    assert by_owner(credit) == {1: -4 * quantum, 2: -3 * quantum, 3: -3 * quantum}
    # Same input, same output: ties are broken deterministically.
    assert allocate([node_line(1, "n1", str(10 * quantum), 0, 1, gpus=3)], jobs[::-1]) == shares


def test_largest_remainder_function() -> None:
    assert largest_remainder(10, [1, 1, 1]) == [4, 3, 3]
    # 100 x 1/3 = 33.33 (remainder 1/3), 100 x 2/3 = 66.67 (remainder 2/3): the unit goes to 2nd.
    assert largest_remainder(100, [1, 2]) == [33, 67]
    assert largest_remainder(0, [0, 0]) == [0, 0]
    with pytest.raises(ValueError, match="cannot split a non-zero total over zero weights"):
        largest_remainder(1, [0])


def test_unknown_gpu_count_uses_the_peak_the_jobs_held() -> None:
    # Type unknown; jobs held 3 GPUs (00:00-01:00) and 2 more (00:30-01:00): peak 5 GPUs.
    # $10 hour, capacity 5 x 3600: job 1 = 10 x 3 x 3600 / 18000 = 6, job 2 = 10 x 2 x 1800 /
    # 18000 = 2, idle 2.
    shares = allocate(
        [node_line(1, "n1", "10", 0, 1, gpus=None)],
        [job(1, ["n1"], "3", 0, 1), job(2, ["n1"], "2", 0.5, 1)],
    )
    assert by_owner(shares) == {1: Decimal(6), 2: Decimal(2), IDLE: Decimal(2)}


def test_non_gpu_line_goes_to_its_owner_spread_over_days() -> None:
    # $10 of storage over 36 h from day 1 00:00: 24/36 on day 1 = 6.666666666666|67, 12/36 on
    # day 2 = 3.333333333333|33; the one missing 10^-12 goes to the larger remainder (day 1).
    storage = LineItem(id=1, start=at(0), end=at(36), cost=Decimal(10), category=TAGGED, team_id=4)
    other = LineItem(id=2, start=at(0), end=at(1), cost=Decimal("1.5"))
    shares = allocate([storage, other], [])
    per_day = {(s.line_id, s.day): s.amount for s in shares}
    assert per_day == {
        (1, DAY1): Decimal("6.666666666667"),
        (1, DAY1 + 1): Decimal("3.333333333333"),
        (2, DAY1): Decimal("1.5"),
    }
    assert {(s.line_id, s.category, s.team_id, s.node) for s in shares} == {
        (1, TAGGED, 4, ""),
        (2, UNALLOCATED, None, ""),
    }


def test_idle_belongs_to_the_owner_of_the_node_line() -> None:
    line = LineItem(id=1, start=at(0), end=at(1), cost=Decimal(8), node="n1", gpus=8, team_id=3)
    shares = allocate([line], [job(1, ["n1"], "4", 0, 1, team=9)])
    assert {(s.category, s.team_id, s.amount) for s in shares} == {
        (TRAINING, 9, Decimal(4)),
        (IDLE, 3, Decimal(4)),
    }


def test_two_lines_for_one_node_hour_count_gpu_seconds_once() -> None:
    # A usage line and a credit for the same node-hour: both are split, the GPU-seconds of the
    # job are recorded once (on the first line) so run GPU-hours are not doubled.
    shares = allocate(
        [node_line(1, "n1", "8", 0, 1), node_line(2, "n1", "-2", 0, 1)],
        [job(1, ["n1"], "8", 0, 1)],
    )
    assert line_sums(shares) == {1: Decimal(8), 2: Decimal(-2)}
    assert sum(s.gpu_seconds for s in shares) == 8 * 3600


def test_more_decimals_than_stored_are_refused() -> None:
    with pytest.raises(ValueError, match=f"more than {MONEY_PLACES} decimal places"):
        allocate([node_line(1, "n1", "0.0000000000001", 0, 1)], [])


def test_match_node_exact_first_then_path_suffix_then_case() -> None:
    names = node_name_map(["gpu-1", "gpu-10", "GPU-2"])
    assert match_node(resource_name="gpu-1", resource_id="", tags={}, node_names=names) == "gpu-1"
    arn = "arn:aws:ec2:us-east-1:1:instance/gpu-10"
    assert match_node(resource_name="", resource_id=arn, tags={}, node_names=names) == "gpu-10"
    assert (
        match_node(resource_name="i-0abc", resource_id="i-0abc", tags={"Name": "gpu-1"},
                   node_names=names)
        == "gpu-1"
    )  # fmt: skip
    azure = "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/virtualMachines/gpu-2"
    assert match_node(resource_name="", resource_id=azure, tags={}, node_names=names) == "GPU-2"
    # A prefix is not a match: gpu-100 is neither gpu-1 nor gpu-10.
    assert (
        match_node(resource_name="gpu-100", resource_id="x/gpu-100", tags={}, node_names=names)
        is None
    )


def test_spread_idle_is_pooled_per_day_and_group_and_split_by_job_cost() -> None:
    # Pool p: n1 ($80, job 1 holds 4 of 8 GPUs -> 40 training, 40 idle) and n2 ($32, job 2
    # holds 4 -> 16, idle 16). Pooled idle 56 over job costs 40:16 -> 40 and 16.
    lines = [
        LineItem(1, at(0), at(1), Decimal(80), "n1", 8, spread_pool="p", team_id=5),
        LineItem(2, at(0), at(1), Decimal(32), "n2", 8, spread_pool="p", team_id=5),
    ]
    shares = allocate(lines, [job(1, ["n1"], "4", 0, 1, team=1), job(2, ["n2"], "4", 0, 1, team=2)])
    idle = {
        (s.job_id, s.team_id, s.node, s.line_id): s.amount for s in shares if s.category == IDLE
    }
    assert idle == {(1, 1, "", 1): Decimal(40), (2, 2, "", 1): Decimal(16)}
    assert sum(s.amount for s in shares) == Decimal(112)


def test_spread_without_jobs_that_day_keeps_the_idle_with_the_line_owner() -> None:
    lines = [LineItem(1, at(24), at(25), Decimal(10), "n1", 8, spread_pool="p", team_id=5)]
    shares = allocate(lines, [job(1, ["n1"], "8", 0, 1)])
    assert [(s.category, s.team_id, s.node, s.amount) for s in shares] == [
        (IDLE, 5, "n1", Decimal(10))
    ]


def test_shared_methods_in_the_engine() -> None:
    # Direct spend: team 1 training 6 (AWS), team 2 training 2 (AWS), team 3 tagged 4.
    lines = [
        LineItem(1, at(0), at(1), Decimal(8), "n1", 8, provider="AWS", currency="USD"),
        LineItem(2, at(0), at(1), Decimal(4), category=TAGGED, team_id=3),
        LineItem(3, at(0), at(1), Decimal(9), shared=engine.SharedRule(engine.EVEN)),
        LineItem(
            4, at(0), at(1), Decimal(4), provider="AWS", currency="USD",
            shared=engine.SharedRule(engine.GPU_SPEND),
        ),
        LineItem(5, at(0), at(1), Decimal(10), shared=engine.SharedRule(engine.FIXED, ((2, 1),
                                                                                       (3, 4)))),
    ]  # fmt: skip
    jobs = [job(1, ["n1"], "6", 0, 1, team=1), job(2, ["n1"], "2", 0, 1, team=2)]
    shared = {
        (s.line_id, s.team_id): s.amount for s in allocate(lines, jobs) if s.category == "shared"
    }
    assert shared == {
        (3, 1): 3, (3, 2): 3, (3, 3): 3,  # even among the 3 teams with spend
        (4, 1): 3, (4, 2): 1,  # 4 x 6/8 and 4 x 2/8
        (5, 2): 2, (5, 3): 8,  # 1:4
    }  # fmt: skip
