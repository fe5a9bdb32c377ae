"""Writes the run-economics rollup (finops.economics.models.RunEconomics) of a month.

economics_refresh(month) replaces the month's rows, one per RunCost row of the month, from the
read-time formulas themselves (no copy of them here):
- waste by cause: finops.waste.selectors.run_wastes(month=...) (the parts of this month), each
  row the attempts on its cluster (as the runs browser's waste column sums them);
- energy: finops.energy.selectors.energies over the month, per cluster (the ledger rows of the
  cluster's jobs); a run with two currencies on one cluster has its energy on the first;
- efficiency: finops.run_metrics.selectors.run_efficiencies (the whole run), written on the
  month's rows and on the run's rows of its other months (they show the whole run too).
A fixed number of queries per chunk of about CHUNK_ROWS rows (bulk reads, bulk writes), the
month read and written chunk by chunk (its checkpoint advice summed over the chunks:
finops.waste.advice.AdviceSums) so that memory is bounded by a chunk, not by the month.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from billing_ingest.loading.copy_load import bulk_load
from finops.attribution.models import RunCost
from finops.core.sql_arrays import AnyOf
from finops.economics.advice import advice_stamp
from finops.economics.models import (
    CHECKPOINT_ADVICE_FIGURES,
    TEAM_ENERGY_FIGURES,
    CheckpointAdviceMonth,
    CheckpointAdviceRow,
    RunEconomics,
    TeamEnergyMonth,
    TeamEnergyRow,
    TeamWasteMonth,
    TeamWasteRow,
)
from finops.economics.selectors import team_month_energy_stored, team_months_waste_stored
from finops.energy.models import JobEnergy
from finops.energy.selectors import (
    NodeFacts,
    RunEnergy,
    energies,
    measured_gpu_hours_of_team,
)
from finops.org.models import Team
from finops.run_metrics.selectors import RunEfficiency, RunKey, run_efficiencies
from finops.waste.advice import (
    AdviceGroup,
    AdviceSums,
    GroupKey,
    advice_rows,
    checkpoint_advice,
    checkpoint_write_minutes,
)
from finops.waste.causes import CAUSES, WasteParts
from finops.waste.selectors import RunWaste, run_wastes, waste_settings

# The efficiency columns, refreshed on every row of a run whenever one of its months is.
EFFICIENCY_FIELDS = (
    "has_metrics", "useful_tokens", "samples", "steps", "run_cost", "run_gpu_seconds",
    "cost_per_million_tokens", "cost_per_thousand_samples", "tokens_per_gpu_hour", "mfu",
    "flops_per_token", "peak_flops_per_gpu", "peak_source", "gpu_model", "dtype",
)  # fmt: skip


_NO_METRICS: dict[str, Any] = {
    "has_metrics": False, "useful_tokens": None, "samples": None, "steps": None,
    "run_cost": None, "run_gpu_seconds": Decimal(0), "cost_per_million_tokens": None,
    "cost_per_thousand_samples": None, "tokens_per_gpu_hour": None, "mfu": None,
    "flops_per_token": None, "peak_flops_per_gpu": None, "peak_source": "", "gpu_model": "",
    "dtype": "",
}  # fmt: skip


def _efficiency_values(e: RunEfficiency | None) -> dict[str, Any]:
    if e is None:
        return dict(_NO_METRICS)
    return {
        "has_metrics": True, "useful_tokens": e.useful_tokens, "samples": e.samples,
        "steps": e.steps, "run_cost": e.cost, "run_gpu_seconds": e.gpu_seconds,
        "cost_per_million_tokens": e.cost_per_million_tokens,
        "cost_per_thousand_samples": e.cost_per_thousand_samples,
        "tokens_per_gpu_hour": e.tokens_per_gpu_hour, "mfu": e.mfu,
        "flops_per_token": e.flops_per_token, "peak_flops_per_gpu": e.peak_flops_per_gpu,
        "peak_source": e.peak_source, "gpu_model": e.gpu_model, "dtype": e.dtype,
    }  # fmt: skip


def _waste_values(waste: RunWaste | None, cluster: str) -> dict[str, Any]:
    parts = WasteParts()
    for row in waste.attempts if waste is not None else []:
        if row.attempt.cluster == cluster:
            parts.add(row.parts)
    return {
        "waste_rework": parts.rework,
        "waste_restart": parts.restart,
        "waste_abandoned": parts.abandoned,
        "waste_cancelled": parts.cancelled,
        "waste_idle": parts.idle_in_allocation,
        "waste_total": parts.total,
        "waste_estimated": ",".join(c for c in CAUSES if c in parts.estimated_causes),
    }


def _energy_values(energy: RunEnergy | None) -> dict[str, Any]:
    if energy is None:
        return {}
    return {
        "gpu_kwh": energy.gpu_kwh,
        "measured_kwh": energy.measured_kwh,
        "estimated_kwh": energy.estimated_kwh,
        "facility_kwh": energy.facility_kwh,
        "co2e_kg": energy.co2e_kg,
        "energy_estimated": energy.estimated,
        "co2e_missing_kwh": energy.co2e_missing_kwh,
        "pue": energy.pue,
        "pue_source": energy.pue_source,
        "grid_g_per_kwh": energy.grid_g_per_kwh,
        "grid_source": energy.grid_source,
        "grid_year": energy.grid_year,
        "power_source": energy.power_source,
    }


def _team_q(team_ids: set[int | None]) -> Q:
    q = Q(team_id__in=sorted(t for t in team_ids if t is not None))
    return q | Q(team__isnull=True) if None in team_ids else q


@dataclass(frozen=True, slots=True)
class _Rollup:
    """What economics_refresh reads of one RunCost row."""

    team_id: int | None
    team_slug: str | None
    run_id: str
    cluster: str
    currency: str
    category: str
    cost: Decimal


def _month_energy(
    month: dt.date,
    rollups: list[_Rollup],
    run_ids: list[str] | None,
    known: dict[str, NodeFacts | None] | None = None,
) -> dict[tuple[Any, ...], RunEnergy]:
    """Energy per (team id, run id, cluster) of the month: energies() per cluster (`known`:
    the node facts read by the chunks before)."""
    found: dict[tuple[Any, ...], RunEnergy] = {}
    for cluster in sorted({r.cluster for r in rollups}):
        teams = {r.team_id for r in rollups if r.cluster == cluster}
        selected = _team_q(teams) & Q(job__cluster=cluster)
        if run_ids is not None:
            selected &= Q(run_id__in=run_ids)
        found_energy = energies(months=[month], runs=selected, known=known)
        for (team_id, run_id), energy in found_energy.items():
            found[(team_id, run_id, cluster)] = energy
    return found


# RunCost rows per chunk of economics_refresh: the runs' attempts, causes and energy held at
# once (a whole 1,000-node month of 30,000 runs was 1.29 GB; 10,000 nodes outgrew 12 GB).
CHUNK_ROWS = 5000


def _chunks(rollups: list[_Rollup], size: int) -> list[list[_Rollup]]:
    """The rollups (in their order: team, run, cluster, currency) cut into runs of about
    `size` rows, never inside a (team, run): the energy of a run on a cluster goes to its first
    currency's row, and its currencies' attempts share jobs (their pricing mix)."""
    chunks: list[list[_Rollup]] = []
    current: list[_Rollup] = []
    for rollup in rollups:
        if len(current) >= size and (current[-1].team_id, current[-1].run_id) != (
            rollup.team_id, rollup.run_id
        ):  # fmt: skip
            chunks.append(current)
            current = []
        current.append(rollup)
    if current:
        chunks.append(current)
    return chunks


@dataclass(slots=True)
class _Written:
    rows: int = 0
    measured: int = 0
    others: int = 0


def _refresh_chunk(
    month: dt.date,
    rollups: list[_Rollup],
    refreshed_at: dt.datetime,
    advice: AdviceSums | None,
    known: dict[str, NodeFacts | None],
) -> _Written:
    """Write the RunEconomics rows of one chunk of the month's rollups (and their runs'
    efficiency on their other months' rows); add their waste to `advice`."""
    key_of = [RunKey(r.team_id, r.team_slug or "", r.run_id, r.currency) for r in rollups]
    keys = sorted(set(key_of), key=lambda k: (k.team_slug, k.run_id, k.currency))
    wastes = run_wastes(keys, month=month)
    efficiencies = run_efficiencies(keys)
    # Each run's energy is its own ledger rows' (nothing apportioned between runs): the
    # chunk's runs alone give each the same figures as the whole month.
    energy = _month_energy(month, rollups, sorted({r.run_id for r in rollups}), known)
    energy_given: set[tuple[Any, ...]] = set()
    rows = []
    for rollup, key in zip(rollups, key_of, strict=True):
        place = (rollup.team_id, rollup.run_id, rollup.cluster)
        run_energy = None if place in energy_given else energy.get(place)
        energy_given.add(place)
        rows.append(
            {
                "billing_period": month, "team_id": rollup.team_id, "run_id": rollup.run_id,
                "cluster": rollup.cluster, "currency": rollup.currency,
                "category": rollup.category, "cost": rollup.cost,
                **_waste_values(wastes.get(key), rollup.cluster),
                **_energy_values(run_energy),
                **_efficiency_values(efficiencies.get(key)),
                "refreshed_at": refreshed_at,
            }
        )  # fmt: skip
    # One INSERT run over the chunk's rows (COPY on PostgreSQL), each value adapted by its
    # field as bulk_create would: on SQLite bulk_create's 999-parameter limit made it 27 rows
    # a statement. The chunks go in the rollups' order: the ids keep the whole month's order.
    bulk_load(RunEconomics, rows)
    if advice is not None:
        advice.add(wastes.values())
    return _Written(
        rows=len(rows),
        measured=sum(1 for r in rows if r["has_metrics"]),
        others=_refresh_other_months(month, efficiencies),
    )


@transaction.atomic
def economics_refresh(*, month: dt.date, run_ids: list[str] | None = None) -> dict[str, int]:
    """Replace the month's RunEconomics rows (one per RunCost row) and refresh the efficiency
    columns of the same runs' rows in other months. Idempotent. With `run_ids` (an import of
    run metrics names its runs), only those runs' rows (of any team). The runs are read and
    written in chunks of about CHUNK_ROWS rows (_chunks): memory bounded by a chunk, not the
    month."""
    # Taken before anything is read: a change meanwhile leaves the stored advice stale.
    stamp = advice_stamp()
    wanted = RunCost.objects.filter(billing_period=month)
    stale = RunEconomics.objects.filter(billing_period=month)
    if run_ids is not None:
        run_ids = sorted(set(run_ids))
        wanted, stale = wanted.filter(run_id__in=run_ids), stale.filter(run_id__in=run_ids)
    # Plain rows, not model instances: a month has tens of thousands of runs.
    rollups = [
        _Rollup(*row)
        for row in wanted.order_by("team_id", "run_id", "cluster", "billing_currency").values_list(
            "team_id", "team__slug", "run_id", "cluster", "billing_currency", "category", "cost"
        )
    ]
    refreshed_at = timezone.now()
    stale.delete()
    # The month's checkpoint advice from the same wastes (every run of the month; its advice
    # groups summed here, chunk by chunk, for the pages and the recommendations step), or,
    # for the runs an import named, their teams' advice recomputed.
    sums = AdviceSums(month) if run_ids is None else None
    written = _Written()
    # The nodes' provider, region and GPU model (energies), read once for every chunk.
    known: dict[str, NodeFacts | None] = {}
    for chunk in _chunks(rollups, CHUNK_ROWS):
        done = _refresh_chunk(month, chunk, refreshed_at, sums, known)
        written.rows += done.rows
        written.measured += done.measured
        written.others += done.others
    if sums is not None:
        advice = checkpoint_advice_store(month=month, groups=sums.groups(), stamp=stamp)
    else:
        advice = checkpoint_advice_store(month=month, team_ids={r.team_id for r in rollups})
    return {"runs": written.rows, "measured_runs": written.measured,
            "other_month_rows": written.others, "checkpoint_advice_rows": advice,
            "team_energy_rows": team_energy_store(month=month),
            "team_waste_rows": team_waste_store(month=month)}  # fmt: skip


def team_waste_store(*, month: dt.date) -> int:
    """Store the month's waste per team and currency, and of the unowned runs (TeamWasteMonth
    and its rows), from its RunEconomics rows (team_months_waste_stored: what the waste card
    summed from them at read time); the number of rows written. Every team of the month at
    once: an import of some runs' metrics changes their teams' sums."""
    (rows,) = team_months_waste_stored(
        months=[month], teams=Team.objects.all(), include_unowned=True
    ).values()
    TeamWasteMonth.objects.filter(billing_period=month).delete()
    header = TeamWasteMonth.objects.create(billing_period=month)
    TeamWasteRow.objects.bulk_create(
        [
            TeamWasteRow(
                month=header, team=row.team, currency=row.currency, runs=row.runs,
                cost=row.cost, **{cause: getattr(row.parts, cause) for cause in CAUSES},
                estimated_causes=",".join(c for c in CAUSES if c in row.parts.estimated_causes),
            )
            for row in rows
        ],
        batch_size=500,
    )  # fmt: skip
    return len(rows)


def team_energy_store(*, month: dt.date) -> int:
    """Store the month's energy per team and of the unowned runs (TeamEnergyMonth and its
    rows) from its RunEconomics rows (team_month_energy_stored: the figures the read-time
    team_month_energy gives) and each team's measured GPU-hours from the ledger; the number of
    rows written. Every team of the month at once (one read of the month's rows, and one
    ledger query per team): an import of some runs' metrics changes their teams' sums."""
    newest = JobEnergy.objects.order_by("-pk").values_list("pk", flat=True).first()
    team_ids = sorted(
        {
            t
            for t in RunEconomics.objects.filter(billing_period=month)
            .order_by()
            .values_list("team_id", flat=True)
            .distinct()
            if t is not None
        }
    )
    rows = team_month_energy_stored(month=month, team_ids=[*team_ids, None])
    pk_of = dict(Team.objects.filter(pk__in=team_ids).values_list("slug", "pk"))
    TeamEnergyMonth.objects.filter(billing_period=month).delete()
    header = TeamEnergyMonth.objects.create(billing_period=month, newest_job_energy=newest)
    stored = []
    for row in rows:
        team_id = pk_of[row.team] if row.team else None
        measured = measured_gpu_hours_of_team(month=month, team_id=team_id)
        stored.append(
            TeamEnergyRow(
                month=header, team_id=team_id, measured_gpu_hours=measured,
                **{name: getattr(row, name) for name in TEAM_ENERGY_FIGURES},
            )
        )  # fmt: skip
    TeamEnergyRow.objects.bulk_create(stored, batch_size=500)
    return len(stored)


def checkpoint_advice_store(
    *,
    month: dt.date,
    groups: Mapping[GroupKey, AdviceGroup] | None = None,
    team_ids: set[int | None] | None = None,
    stamp: str = "",
) -> int:
    """Store the month's checkpoint advice (CheckpointAdviceMonth and its rows); the number of
    rows written. From `groups` (every run of the month summed by AdviceSums, as
    economics_refresh sums them chunk by chunk, read at `stamp`:
    finops.economics.advice.advice_stamp taken before them), or computed here: for
    the teams of `team_ids` only (None: the unowned runs) when the month is stored already
    with the current settings (its stamp kept: stale once anything moved, as an import of
    run metrics has), else for every team and the unowned runs (blank stamp: the
    recommendations step computes its advice itself, as before the month's step ran)."""
    config = waste_settings()
    write = checkpoint_write_minutes()
    header = CheckpointAdviceMonth.objects.filter(billing_period=month).first()
    current = header is not None and (
        header.checkpoint_interval_minutes, header.restart_minutes,
        header.checkpoint_write_minutes,
    ) == (config.checkpoint_interval_minutes, config.restart_minutes, write)  # fmt: skip
    if groups is not None:
        teams = Team.objects.in_bulk({team_id for team_id, *_ in groups if team_id is not None})
        advice = advice_rows(groups, config, teams=teams)
        team_ids = None
    elif team_ids is not None and current:
        owned = Team.objects.filter(pk__in=[t for t in team_ids if t is not None])
        advice = checkpoint_advice(month=month, teams=owned, include_unowned=None in team_ids)
    else:
        advice = checkpoint_advice(month=month, teams=Team.objects.all(), include_unowned=True)
        team_ids = None
    if team_ids is None or header is None:
        CheckpointAdviceMonth.objects.filter(billing_period=month).delete()
        header = CheckpointAdviceMonth.objects.create(
            billing_period=month, checkpoint_interval_minutes=config.checkpoint_interval_minutes,
            restart_minutes=config.restart_minutes, checkpoint_write_minutes=write, stamp=stamp,
        )  # fmt: skip
    else:
        stale = Q(team_id__in=[t for t in team_ids if t is not None])
        if None in team_ids:
            stale |= Q(team__isnull=True)
        header.rows.filter(stale).delete()
        header.save(update_fields=["refreshed_at"])
    CheckpointAdviceRow.objects.bulk_create(
        [
            CheckpointAdviceRow(
                month=header, team_id=row.team.pk if row.team else None,
                **{name: getattr(row, name) for name in CHECKPOINT_ADVICE_FIGURES},
            )
            for row in advice
        ],
        batch_size=500,
    )  # fmt: skip
    return len(advice)


def _refresh_other_months(month: dt.date, found: dict[RunKey, RunEfficiency | None]) -> int:
    """The whole-run efficiency on the runs' rows of their other months (only the rows whose
    figures changed are written)."""
    by_key = {(k.team_id, k.run_id, k.currency): e for k, e in found.items()}
    changed = []
    # Plain rows (the stored figures only): most are unchanged, and only the changed ones
    # become instances, carrying just the columns bulk_update writes. One query: the run ids
    # go as one array parameter (AnyOf), not in chunks.
    stored = (
        RunEconomics.objects.filter(AnyOf("run_id", {k.run_id for k in found}))
        .exclude(billing_period=month)
        .values_list("pk", "team_id", "run_id", "currency", *EFFICIENCY_FIELDS)
    )
    for pk, team_id, run_id, currency, *figures in stored:
        ident = (team_id, run_id, currency)
        if ident not in by_key:
            continue
        values = _efficiency_values(by_key[ident])
        if all(
            _same(old, values[name]) for name, old in zip(EFFICIENCY_FIELDS, figures, strict=True)
        ):
            continue
        changed.append(RunEconomics(pk=pk, **values))
    RunEconomics.objects.bulk_update(changed, EFFICIENCY_FIELDS, batch_size=500)
    return len(changed)


def _same(stored: object, value: object) -> bool:
    if isinstance(stored, Decimal) or isinstance(value, Decimal):
        return stored is not None and value is not None and Decimal(str(stored)) == value
    return stored == value


def economics_delete_month(*, month: dt.date) -> int:
    """Drop a month's rows (its ledger was removed)."""
    CheckpointAdviceMonth.objects.filter(billing_period=month).delete()
    TeamEnergyMonth.objects.filter(billing_period=month).delete()
    TeamWasteMonth.objects.filter(billing_period=month).delete()
    deleted, _ = RunEconomics.objects.filter(billing_period=month).delete()
    return deleted


def economics_refresh_months(
    *, months: list[dt.date] | None = None
) -> list[tuple[dt.date, dict[str, int]]]:
    """economics_refresh of each month (default: every month the ledger has run rollups of),
    in order; each month in its own transaction."""
    if months is None:
        months = sorted(set(RunCost.objects.values_list("billing_period", flat=True)))
    return [(month, economics_refresh(month=month)) for month in months]
