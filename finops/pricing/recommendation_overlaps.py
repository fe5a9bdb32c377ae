"""Where two recommendations' savings overlap on the same cost (docs/pricing.md, "One saving per
cost"). Pure: drafts in, drafts out; the headline total reads what this stamps.

An inference endpoint's pods are left out of the idle-allocation recommendation where it is
made (finops.waste.advice.allocation_idle): the endpoint's rightsize reads the same
utilisation. What remains overlaps only in part: the idle-allocation recommendation of a team
and cluster (`allocation:<cluster>`, its idle share s = idle / the jobs' cost) and a
recommendation that saves on the same team's jobs on that cluster at their current size:
`checkpoint` (its lost work) and `spot` (its price). With the GPUs they held idle released,
those jobs cost (1 - s) of what they did, and so does the other saving: the overlap is that
saving x s, estimated at the cluster's idle share (not the jobs' own). It is stamped on the
partner's assumptions (`overlap_with`: kind, key, amount); the headline total of the open
recommendations (open_savings_totals) subtracts it while both are open.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal

from finops.pricing.models import Recommendation
from finops.pricing.recommendation_rules import Draft

CENT = Decimal("0.01")
ALLOCATION_PREFIX = "allocation:"


def _idle_shares(drafts: Sequence[Draft]) -> dict[tuple[int | None, str, str], Decimal]:
    """(team, currency, cluster) -> the idle-allocation recommendation's idle share."""
    shares = {}
    for d in drafts:
        if d.kind != "idle" or not d.key.startswith(ALLOCATION_PREFIX):
            continue
        cost = Decimal(d.evidence.get("runs_cost") or 0)
        if cost > 0:
            cluster = d.key.removeprefix(ALLOCATION_PREFIX)
            shares[(d.team_id, d.currency, cluster)] = min(Decimal(1), d.monthly_savings / cost)
    return shares


def _savings_by_cluster(draft: Draft) -> dict[str, Decimal]:
    """The part of a checkpoint or spot draft's saving on each cluster."""
    if draft.kind == "checkpoint":
        return {str(draft.evidence.get("cluster", "")): draft.monthly_savings}
    if draft.kind == "spot":
        by = draft.evidence.get("savings_by_cluster") or {}
        return {cluster: Decimal(amount) for cluster, amount in by.items()}
    return {}


def overlaps_stamped(drafts: Sequence[Draft]) -> list[Draft]:
    """The drafts, each checkpoint or spot one that overlaps an idle-allocation draft of its
    team, currency and cluster with `overlap_with` in its assumptions."""
    shares = _idle_shares(drafts)
    out = []
    for d in drafts:
        found = []
        for cluster, saving in sorted(_savings_by_cluster(d).items()):
            share = shares.get((d.team_id, d.currency, cluster))
            amount = (saving * share).quantize(CENT, rounding=ROUND_HALF_EVEN) if share else None
            if amount:
                found.append({
                    "kind": "idle", "key": f"{ALLOCATION_PREFIX}{cluster}",
                    "amount": str(min(amount, d.monthly_savings)),
                    "idle_share": str(share.quantize(Decimal("0.0001"))) if share else "",
                })  # fmt: skip
        if found:
            d = dataclasses.replace(d, assumptions={**d.assumptions, "overlap_with": found})
        out.append(d)
    return out


def open_savings_totals(rows: Iterable[Recommendation]) -> list[tuple[str, Decimal]]:
    """The open recommendations' monthly savings per currency (sorted), each overlap counted
    once: a stamped overlap (overlap_with) is subtracted while its partner is open too."""
    open_rows = [r for r in rows if r.status == Recommendation.Status.OPEN]
    open_keys = {(r.team_id, r.currency, r.kind, r.key) for r in open_rows}
    totals: dict[str, Decimal] = {}
    for row in open_rows:
        total = totals.get(row.currency, Decimal(0)) + row.monthly_savings
        for other in row.assumptions.get("overlap_with") or []:
            if (row.team_id, row.currency, other["kind"], other["key"]) in open_keys:
                total -= Decimal(other["amount"])
        totals[row.currency] = total
    return sorted(totals.items())


@dataclasses.dataclass(frozen=True, slots=True)
class SavingsTotal:
    """The headline of the open recommendations in one currency: `total` with each overlap
    counted once (open_savings_totals), `rows_sum` the rows' savings as listed."""

    currency: str
    total: Decimal
    rows_sum: Decimal

    @property
    def overlap(self) -> Decimal:
        return self.rows_sum - self.total


def open_savings_summary(rows: Iterable[Recommendation]) -> list[SavingsTotal]:
    """open_savings_totals beside the plain sum of the open rows, per currency (sorted): the
    page says how much the netting took off, so the headline is not a puzzle next to its rows."""
    rows = list(rows)
    sums: dict[str, Decimal] = {}
    for row in rows:
        if row.status == Recommendation.Status.OPEN:
            sums[row.currency] = sums.get(row.currency, Decimal(0)) + row.monthly_savings
    return [
        SavingsTotal(currency, total, sums[currency])
        for currency, total in open_savings_totals(rows)
    ]
