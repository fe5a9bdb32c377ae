"""Dry-run preview of a mapping-rule change: what it would move between teams in a month,
with TeamResolver resolving owners once with the rules as stored and once with the change.

Here rather than in org: it reads the ledger and runs attribution's resolver, and org stays
below attribution (attribution reads org's rules and teams, never the other way round)."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from django.conf import settings

from billing_ingest.models import CostLineItem, JobRecord
from finops.attribution.inputs.team_mapping import Rule, TeamRef, TeamResolver
from finops.attribution.models import AllocatedCost, AttributionRun
from finops.core.money import MoneySum
from finops.org.models import MappingRule, Team

_CHUNK = 5000

# A rule created now sorts after every existing rule of the same priority and kind (ids grow).
_NEW_RULE_ID = sys.maxsize
_LINE_KINDS = frozenset({MappingRule.Kind.TAG, MappingRule.Kind.SUB_ACCOUNT})
_JOB_KINDS = frozenset(
    {MappingRule.Kind.SLURM_ACCOUNT, MappingRule.Kind.NAMESPACE, MappingRule.Kind.LABEL}
)


@dataclass(frozen=True, slots=True)
class Move:
    """Rows that change owner from one team to another (slugs; None: no team), per currency."""

    from_team: str | None
    to_team: str | None
    currency: str
    count: int
    amount: Decimal


@dataclass(frozen=True)
class RulePreview:
    """What a rule change would move in `month` (None: no month was attributed yet).

    lines: line items whose owner changes, with their EffectiveCost. jobs: jobs with ledger
    rows in the month whose team changes, with their ledger cost. team_names: slug -> name of
    every team named; new_teams: slugs a naming convention would create (no such team yet).
    """

    month: date | None
    lines: list[Move] = field(default_factory=list)
    jobs: list[Move] = field(default_factory=list)
    team_names: dict[str, str] = field(default_factory=dict)
    new_teams: frozenset[str] = frozenset()

    @property
    def moves_anything(self) -> bool:
        return bool(self.lines or self.jobs)


def latest_attributed_month() -> date | None:
    return (
        AttributionRun.objects.filter(status=AttributionRun.Status.SUCCEEDED)
        .order_by("-billing_period")
        .values_list("billing_period", flat=True)
        .first()
    )


def _rule_sets(rule_data: Mapping[str, Any]) -> tuple[list[Rule], list[Rule], set[str]]:
    """(current rules, rules after the change, kinds the change touches), in resolver order."""
    current = list(
        MappingRule.objects.order_by("priority", "id").values_list(
            "id", "kind", "key", "value", "team_id", "priority"
        )
    )
    rule_id = rule_data.get("id")
    rule_id = int(rule_id) if rule_id not in (None, "") else None
    kinds = {kind for pk, kind, *_ in current if pk == rule_id}
    proposed = [row for row in current if row[0] != rule_id]
    if not rule_data.get("delete"):
        kind = str(rule_data["kind"])
        team = rule_data["team"]
        team_id = team.pk if isinstance(team, Team) else int(team)
        key = str(rule_data.get("key") or "") if kind in MappingRule.KEYED_KINDS else ""
        priority = int(rule_data.get("priority", 100))
        proposed.append(
            (rule_id or _NEW_RULE_ID, kind, key, str(rule_data["value"]), team_id, priority)
        )
        kinds.add(kind)

    def ordered(rows: list[tuple[Any, ...]]) -> list[Rule]:
        rows = sorted(
            rows, key=lambda r: MappingRule.precedence(priority=r[5], kind=r[1], rule_id=r[0])
        )
        return [Rule(kind, key, value, team_id) for _, kind, key, value, team_id, _ in rows]

    return ordered(current), ordered(proposed), kinds


class _Moves:
    """Accumulates (from, to, currency) -> (distinct ids, amount)."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str | None, str | None, str], set[int]] = defaultdict(set)
        self._sums: dict[tuple[str | None, str | None, str], Decimal] = defaultdict(Decimal)

    def add(self, key: tuple[str | None, str | None, str], pk: int, amount: Decimal) -> None:
        self._ids[key].add(pk)
        self._sums[key] += amount

    def result(self) -> list[Move]:
        return [
            Move(src, dst, currency, len(self._ids[(src, dst, currency)]), amount)
            for (src, dst, currency), amount in sorted(
                self._sums.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or "", kv[0][2])
            )
        ]


def mapping_rule_preview(*, rule_data: Mapping[str, Any], month: date | None) -> RulePreview:
    """Dry run of a MappingRule change: what would change team in `month` (default: the latest
    month attribution succeeded for). Reads only; nothing is written, not even the teams a
    naming convention would create (those are reported in new_teams).

    rule_data: the proposed rule (kind, key, value, team: Team or id, priority) with `id` when it
    edits an existing rule; or {"id": pk, "delete": True} for a rule being deleted.

    Owners are resolved twice with TeamResolver, once with the rules as stored and once with
    the change applied, so the preview isolates the change (not drift since the last run):
    - line items of the month (succeeded batches) whose owner changes. The owner of a GPU node
      line only receives its idle part (jobs on the node keep their share), and a line that
      loses its owner goes to shared-cost rules or unallocated;
    - jobs with ledger rows in the month whose team changes, with that ledger cost.
    """
    month = month.replace(day=1) if month is not None else latest_attributed_month()
    if month is None:
        return RulePreview(month=None)
    current, proposed, kinds = _rule_sets(rule_data)
    tag_keys = settings.FINOPS_TEAM_TAG_KEYS
    before = TeamResolver(rules=current, team_tag_keys=tag_keys)
    after = TeamResolver(rules=proposed, team_tag_keys=tag_keys)
    teams = {pk: (slug, name) for pk, slug, name in Team.objects.values_list("id", "slug", "name")}
    slugs = {pk: slug for pk, (slug, _) in teams.items()}

    def slug_of(ref: TeamRef | None) -> str | None:
        return slugs[ref] if isinstance(ref, int) else ref

    lines = _Moves()
    if kinds & _LINE_KINDS:
        rows = (
            CostLineItem.objects.settled()
            .filter(billing_period=month)
            .order_by()
            .values_list("id", "tags", "sub_account_id", "billing_currency", "effective_cost")
        )
        for pk, tags, sub, currency, cost in rows.iterator(chunk_size=_CHUNK):
            tags = tags if isinstance(tags, dict) else {}
            src = slug_of(before.line_team(tags=tags, sub_account=sub))
            dst = slug_of(after.line_team(tags=tags, sub_account=sub))
            if src != dst:
                lines.add((src, dst, currency), pk, cost)

    jobs = _Moves()
    if kinds & _JOB_KINDS:
        ledger = AllocatedCost.objects.filter(billing_period=month, job__isnull=False)
        owners: dict[int, tuple[str | None, str | None]] = {}
        for pk, account, namespace, labels in JobRecord.objects.filter(
            id__in=ledger.values("job_id")
        ).values_list("id", "account", "namespace", "labels"):
            labels = labels if isinstance(labels, dict) else {}
            src = slug_of(before.job_team(account=account, namespace=namespace, labels=labels))
            dst = slug_of(after.job_team(account=account, namespace=namespace, labels=labels))
            if src != dst:
                owners[pk] = (src, dst)
        if owners:
            costs = (
                ledger.values_list("job_id", "billing_currency")
                .annotate(total=MoneySum("amount"))
                .order_by()
            )
            for job_id, currency, total in costs:
                if job_id in owners:
                    jobs.add((*owners[job_id], currency), job_id, total)

    line_moves, job_moves = lines.result(), jobs.result()
    named = {s for m in (*line_moves, *job_moves) for s in (m.from_team, m.to_team) if s}
    known = {slug: name for slug, name in teams.values()}
    return RulePreview(
        month=month,
        lines=line_moves,
        jobs=job_moves,
        team_names={s: known.get(s, s) for s in named},
        new_teams=frozenset(s for s in named if s not in known),
    )
