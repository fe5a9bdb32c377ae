"""FX tasks: thin wrapper around the loader, so a schedule can refresh rates."""

from __future__ import annotations

from celery import shared_task

from finops.currency.services import fx_rates_load

SOFT_TIME_LIMIT = 10 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 60


@shared_task(soft_time_limit=SOFT_TIME_LIMIT, time_limit=TIME_LIMIT)
def load_fx_rates(path: str) -> dict[str, object]:
    """Load a rate file. Idempotent: loading it again rewrites the same rows."""
    result = fx_rates_load(path=path)
    return {
        "layout": result.layout,
        "rows": result.rows,
        "first_date": result.first_date.isoformat() if result.first_date else None,
        "last_date": result.last_date.isoformat() if result.last_date else None,
        "currencies": list(result.currencies),
    }
