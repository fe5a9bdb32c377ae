"""Energy and emissions of an inference endpoint's month (DESIGN section 9): the energy of its
pods (the ledger's rows of jobs labelled with the endpoint), measured or estimated like a run's
(selectors.energies), per 1,000 requests and per 1M tokens of the same teams' usage."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db.models import Q

from finops.energy.factors import CTX, KWH_PLACES
from finops.energy.selectors import RunEnergy, energies


@dataclass(frozen=True, slots=True)
class EndpointEnergy:
    gpu_kwh: Decimal
    facility_kwh: Decimal
    co2e_kg: Decimal | None
    co2e_missing_kwh: Decimal
    estimated: bool
    requests: int
    tokens: int
    kwh_per_1k_requests: Decimal | None
    kwh_per_1m_tokens: Decimal | None
    co2e_kg_per_1k_requests: Decimal | None
    co2e_kg_per_1m_tokens: Decimal | None
    notes: tuple[str, ...]


def _per(total: Decimal | None, count: int, unit: int) -> Decimal | None:
    if total is None or not count:
        return None
    return CTX.divide(total * unit, Decimal(count)).quantize(KWH_PLACES, context=CTX)


def endpoint_energy(
    *,
    month: date,
    endpoint: str,
    team_ids: Iterable[int],
    include_unowned: bool,
    usage: dict[int | None, tuple[int, int]],
) -> EndpointEnergy | None:
    """`usage`: (requests, tokens) per team of the endpoint's month (each team once, whatever
    its currencies). None when the endpoint's pods have no GPU time this month."""
    teams = Q(team_id__in=team_ids)  # a QuerySet: a subquery, not a query of its own
    if include_unowned:
        teams |= Q(team__isnull=True)
    found = energies(months=[month], runs=teams & Q(job__endpoint=endpoint))
    if not found:
        return None
    runs: list[RunEnergy] = list(found.values())
    owners = {team_id for team_id, _ in found}
    requests = sum(usage.get(t, (0, 0))[0] for t in owners)
    tokens = sum(usage.get(t, (0, 0))[1] for t in owners)
    gpu = sum((e.gpu_kwh for e in runs), Decimal(0))
    facility = sum((e.facility_kwh for e in runs), Decimal(0))
    co2 = [e.co2e_kg for e in runs]
    co2e = None if all(c is None for c in co2) else sum((c or Decimal(0) for c in co2), Decimal(0))
    missing = sum((e.co2e_missing_kwh for e in runs), Decimal(0))
    return EndpointEnergy(
        gpu_kwh=gpu,
        facility_kwh=facility,
        co2e_kg=co2e,
        co2e_missing_kwh=missing,
        estimated=any(e.estimated for e in runs),
        requests=requests,
        tokens=tokens,
        kwh_per_1k_requests=_per(facility, requests, 1000),
        kwh_per_1m_tokens=_per(facility, tokens, 10**6),
        # Per request only when every kWh has its CO2e (a part would understate it).
        co2e_kg_per_1k_requests=None if missing else _per(co2e, requests, 1000),
        co2e_kg_per_1m_tokens=None if missing else _per(co2e, tokens, 10**6),
        notes=tuple(note for e in runs for note in e.notes),
    )
