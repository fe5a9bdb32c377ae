"""What the runs bought, wasted and burned (finops.chargeback.economics) at demo scale: the one
bulk selector for a team's month, the statement that shows it, and a close that freezes it,
each timed with its query count, against a baseline measured in the same run (the same
efficiency figures read run by run, as the team trend did before: a few queries per run).

Needs a demo database (`manage.py demo --months 2` or more):

    DATABASE_URL=sqlite:////tmp/hstmt-demo.sqlite3 .venv/bin/python bench/statement_economics.py \
        --team language --month 2026-10
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _timed(label: str, call: Callable[[], Any]) -> tuple[float, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - start
    print(f"{label:<58} {seconds:8.2f} s {len(queries):7,d} queries")
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--team", default="language")
    parser.add_argument("--month", default="2026-10")
    parser.add_argument("--close", default="", help="a month to close and roll back (YYYY-MM)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()
    from django.db import transaction
    from django.db.models import Max

    from finops.attribution.models import Category, RunCost
    from finops.chargeback import documents
    from finops.chargeback.economics import team_month_economics
    from finops.chargeback.selectors import statement_get
    from finops.chargeback.services import period_close
    from finops.core.months import month_parse
    from finops.org.models import Team
    from finops.run_metrics.selectors import RunKey, run_efficiencies

    team = Team.objects.get(slug=args.team)
    month = month_parse(args.month)
    ends = (
        RunCost.objects.filter(team=team, category=Category.TRAINING)
        .order_by()
        .values("run_id", "billing_currency")
        .annotate(last=Max("billing_period"))
    )
    keys = [
        RunKey(team.pk, team.slug, r["run_id"], r["billing_currency"])
        for r in ends
        if r["last"] == month
    ]
    print(f"{team.slug} {args.month}: {len(keys):,} training runs ended in the month")
    baseline, found = _timed(
        "baseline: efficiency run by run",
        lambda: [run_efficiencies([key])[key] for key in keys],
    )
    measured = sum(1 for e in found if e is not None)
    print(f"{'':<58} ({measured:,} with metrics)")
    bulk, together = _timed("efficiency of the same runs in bulk", lambda: run_efficiencies(keys))
    same = sum(1 for key, e in zip(keys, found, strict=True) if together[key] == e)
    print(f"{'':<58} (the same figures for {same:,} of {len(keys):,} runs)")
    selector, economics = _timed(
        "team_month_economics (bought, wasted, burned)",
        lambda: team_month_economics(team=team, month=month),
    )
    for c in economics.currencies:
        print(
            f"  {c.currency}: {c.runs_with_metrics:,} runs with metrics, "
            f"{c.runs_without_metrics:,} without, {c.useful_tokens:,} tokens, "
            f"{c.cost_per_million_tokens} {c.currency}/1M tokens, MFU {c.mfu}, "
            f"waste {c.waste_total} {c.currency} ({c.waste_runs:,} runs)"
        )
    if economics.energy is not None:
        e = economics.energy
        print(
            f"  energy: {e.runs:,} runs, {e.gpu_kwh} GPU kWh ({e.measured_share} measured), "
            f"{e.facility_kwh} facility kWh, {e.co2e_kg} kg CO2e"
        )
    _, statement = _timed(
        "statement page's read (statement_get)", lambda: statement_get(team=team, month=month)
    )
    _timed("statement CSV", lambda: documents.statement_csv(statement))
    _timed("statement PDF", lambda: documents.statement_pdf(statement))
    if args.close:
        with transaction.atomic():
            _timed(f"close {args.close} (every team, economics frozen)",
                   lambda: period_close(month=month_parse(args.close), actor=None))  # fmt: skip
            _timed(
                "closed statement read (frozen)",
                lambda: statement_get(team=team, month=month_parse(args.close)),
            )
            transaction.set_rollback(True)
    print(f"bulk efficiency / baseline: {bulk / baseline:.3f}")
    print(f"whole selector / baseline efficiency alone: {selector / baseline:.3f}")


if __name__ == "__main__":
    main()
