"""The shown idle of the idle showback (selectors.idle_showback) summed on PostgreSQL (issue 34).

Per node-day and currency of the month's ledger: each team's gross job cost w (training and
inference netted per team, then its absolute value, as the engine weighs idle), all jobs' W,
the platform bucket's idle P and the idle of teams other than this one O. A team's shown idle
is the sum over its node-days of P x w / W and O x w / W; each term is floored to `digits`
places with numeric div() (exact integer division), and the number of terms with a remainder is
how far above the floors' sum the exact sum can lie. So the server returns, per team and
currency, a lower and an upper bound of the exact sum `count x 10^-digits` apart, and the
caller rounds both (rounding is monotone): equal, that is the exact sum rounded; apart (the
exact sum within ~1e-25 of a rounding boundary at 30 digits), the caller sums that key again as
Fractions. Read in Python the same sums took 344k grouped rows out of the database and a
QuotientSum step per row (6.6 s of the 1,000-node month's attribution step).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db import connections

from finops.attribution.models import AllocatedCost, Category

# Places of each floored term. The bounds of a team's sum are (its terms) x 10^-30 apart: at
# 344k terms ~3e-25, against the ledger's 1e-12: an undecided figure needs an exact sum that
# close to a half unit. More places cost numeric digits in every division.
SHOWN_DIGITS = 30


@dataclass(frozen=True, slots=True)
class ShownBounds:
    """One (team, currency)'s shown idle as bounds of the exact sums, and its job cost."""

    platform_low: Decimal
    platform_high: Decimal
    others_low: Decimal
    others_high: Decimal
    # The team's GPU job cost (net) on the node-days with a share, exact; how many nodes.
    job_cost: Decimal
    nodes: int


# One pass over the month's node lines: per (node, day, currency, team) the job cost and the
# idle borne (node in byte order: grouping needs no collation's comparisons), then per node-day
# (a window) the weights' total, the platform's idle and all teams' idle; each term's floor and
# whether it had a remainder (div truncates towards zero: a negative quotient with a remainder
# is one below); summed per team, currency and node, then per team and currency, which counts
# the nodes without a COUNT(DISTINCT) sorting every term.
_SQL = """
WITH grouped AS (
    SELECT node COLLATE "C" AS node, day, billing_currency AS currency, team_id,
           SUM(amount) FILTER (WHERE category IN (%(training)s, %(inference)s)) AS job,
           SUM(amount) FILTER (WHERE category = %(idle)s) AS idle
    FROM {table}
    WHERE billing_period = %(month)s AND node <> ''
      AND category IN (%(idle)s, %(training)s, %(inference)s)
    GROUP BY 1, day, billing_currency, team_id
), node_days AS (
    SELECT team_id, currency, node, job, ABS(job) AS weight,
           SUM(ABS(job)) OVER node_day AS total,
           COALESCE(SUM(idle) FILTER (WHERE team_id IS NULL) OVER node_day, 0) AS platform,
           COALESCE(SUM(idle) FILTER (WHERE team_id IS NOT NULL) OVER node_day, 0)
             - COALESCE(idle, 0) AS others
    FROM grouped
    WINDOW node_day AS (PARTITION BY node, day, currency)
), scaled AS (
    SELECT team_id, currency, node, job, total,
           platform * weight * %(scale)s AS platform_n, others * weight * %(scale)s AS others_n
    FROM node_days
    WHERE team_id = ANY(%(teams)s) AND weight <> 0
), floored AS (
    SELECT team_id, currency, node, job,
           DIV(platform_n, total) AS platform_q, DIV(others_n, total) AS others_q,
           platform_n < 0 AS platform_neg, others_n < 0 AS others_neg, platform_n, others_n, total
    FROM scaled
), terms AS (
    SELECT team_id, currency, node, job, platform_q, others_q, platform_neg, others_neg,
           platform_q * total <> platform_n AS platform_rest,
           others_q * total <> others_n AS others_rest
    FROM floored
), per_node AS (
    SELECT team_id, currency, node,
           SUM(platform_q) - COUNT(*) FILTER (WHERE platform_neg AND platform_rest) AS platform_f,
           COUNT(*) FILTER (WHERE platform_rest) AS platform_r,
           SUM(others_q) - COUNT(*) FILTER (WHERE others_neg AND others_rest) AS others_f,
           COUNT(*) FILTER (WHERE others_rest) AS others_r,
           SUM(job) AS job
    FROM terms
    GROUP BY team_id, currency, node
)
SELECT team_id, currency, SUM(platform_f), SUM(platform_r), SUM(others_f), SUM(others_r),
       SUM(job), COUNT(*)
FROM per_node
GROUP BY team_id, currency
"""


def shown_bounds(
    month: date, team_ids: Collection[int], *, digits: int | None = None, using: str = "default"
) -> dict[tuple[int, str], ShownBounds]:
    """{(team id, currency): ShownBounds} of the teams with a share of a node-day in the month
    (PostgreSQL only; one query)."""
    if not team_ids:
        return {}
    places = SHOWN_DIGITS if digits is None else digits
    sql = _SQL.format(table=connections[using].ops.quote_name(AllocatedCost._meta.db_table))
    params: dict[str, date | list[int] | Decimal | str] = {
        "month": month, "teams": list(team_ids), "scale": Decimal(10) ** places,
        "idle": Category.IDLE.value, "training": Category.TRAINING.value,
        "inference": Category.INFERENCE.value,
    }  # fmt: skip
    result: dict[tuple[int, str], ShownBounds] = {}
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        for team_id, currency, p_floor, p_rest, o_floor, o_rest, job, nodes in cursor.fetchall():
            result[(team_id, currency)] = ShownBounds(
                platform_low=_scaled(p_floor, places),
                platform_high=_scaled(p_floor + p_rest, places),
                others_low=_scaled(o_floor, places),
                others_high=_scaled(o_floor + o_rest, places),
                job_cost=job,
                nodes=nodes,
            )
    return result


def _scaled(units: Decimal | int, places: int) -> Decimal:
    """units x 10^-places, exactly whatever its digits (built from its digits, not computed in
    a context of limited precision)."""
    sign, digits, exponent = Decimal(units).as_tuple()
    assert isinstance(exponent, int)  # a sum of integers, never NaN or infinite
    return Decimal((sign, digits, exponent - places))
