"""Server time of the pages at demo scale: each page rendered N times in-process (Django's test
client: routing, middleware, queries, template; no network), median and worst, against the
300 ms goal. Builds the demo month first when the database has none.

    .venv/bin/python bench/pages.py                      # var/bench-pages.sqlite3, full demo
    .venv/bin/python bench/pages.py --scale small --repeat 5
    .venv/bin/python bench/pages.py --only team,runs --repeat 3   # pages whose label starts so
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/finops_pagesbench \
        .venv/bin/python bench/pages.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=["full", "small"], default="full")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--only", default="", help="comma-separated label prefixes (default all)")
    parser.add_argument("--skip", default="", help="comma-separated labels not to time")
    parser.add_argument("--roles", default="finance,lead", help="demo logins to time as")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{ROOT / 'var' / 'bench-pages.sqlite3'}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from billing_ingest.models import CostLineItem
    from finops.attribution.models import RunCost, TeamDailyCost
    from finops.budgets.models import Budget
    from finops.core.months import month_format
    from finops.demo.organisation import FINANCE_USERNAME, LEAD_USERNAME

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    if not TeamDailyCost.objects.exists():
        began = time.monotonic()
        call_command("demo", "--scale", args.scale, stdout=open(os.devnull, "w"))  # noqa: SIM115
        print(f"demo built in {time.monotonic() - began:.0f} s")
    month = TeamDailyCost.objects.order_by("-billing_period").first().billing_period  # type: ignore[union-attr]
    param = month_format(month)
    team_run = RunCost.objects.filter(billing_period=month, category="training").first()
    assert team_run is not None and team_run.team is not None
    team = team_run.team.slug
    print(
        f"{RunCost.objects.filter(billing_period=month).count():,} run rollups, "
        f"{TeamDailyCost.objects.filter(billing_period=month).count():,} team-day rows in {param}"
    )
    org_budget = Budget.objects.filter(team__isnull=True, provider_name="").order_by("pk").first()
    tag_key = _common_tag_key(CostLineItem.objects.filter(billing_period=month))
    pages = [
        ("overview", f"/?month={param}"),
        ("overview 12 months", f"/?month={param}&months=12&by=category"),
        ("team", f"/teams/{team}/?month={param}"),
        ("run", f"/runs/{team}/{team_run.run_id}/?month={param}"),
        ("runs", f"/runs/?month={param}"),
        ("runs by $/GPU-h, p2", f"/runs/?month={param}&ordering=-cost_per_gpu_hour&page=2"),
        # The stored run economics' sorts (finops.economics) and the biggest team's trend.
        ("runs by waste", f"/runs/?month={param}&ordering=-waste"),
        ("runs by $/1M tokens", f"/runs/?month={param}&ordering=cost_per_million_tokens"),
        ("runs by MFU", f"/runs/?month={param}&ordering=-mfu"),
        ("runs by kWh", f"/runs/?month={param}&ordering=-kwh"),
        ("team language", f"/teams/language/?month={param}"),
        ("team efficiency (API)", f"/api/v1/teams/language/efficiency/?month={param}"),
        ("endpoints", f"/endpoints/?month={param}"),
        ("pricing", f"/pricing/?month={param}"),
        ("recommendations (API)", f"/api/v1/recommendations/?month={param}"),
        ("runs CSV (API)", f"/api/v1/runs/?month={param}&format=csv"),
        ("explorer by service", f"/explorer/?month={param}&group_by=service"),
        ("explorer by region", f"/explorer/?month={param}&group_by=region"),
        (f"explorer by tag:{tag_key}", f"/explorer/?month={param}&group_by=tag:{tag_key}"),
        ("budgets", "/budgets/"),
        ("org budget", f"/budgets/{org_budget.pk}/" if org_budget else "/budgets/"),
        ("reconciliation", f"/reconciliation/?month={param}"),
        ("statement", f"/teams/{team}/statements/{param}/"),
        ("close review", f"/close/{param}/"),
        ("checks (API)", f"/api/v1/periods/{param}/checks/"),
        ("imports", "/imports/"),
    ]
    only = tuple(label.strip() for label in args.only.split(",") if label.strip())
    if only:
        pages = [(label, url) for label, url in pages if label.startswith(only)]
    skip = {label.strip() for label in args.skip.split(",") if label.strip()}
    pages = [(label, url) for label, url in pages if label not in skip]
    _trend_against_read_time(month)
    _team_energy_against_read_time(month)
    _stored_panels_against_read_time(month)
    from django.db import connection, reset_queries

    logins = {"finance": FINANCE_USERNAME, "lead": LEAD_USERNAME}
    for user_name in [logins[role] for role in args.roles.split(",")]:
        client = Client()
        client.force_login(User.objects.get(username=user_name))
        print(
            f"\n{user_name}: page, median / worst of {args.repeat} (ms), first (cold: "
            "before the data version's cached panels), queries, size"
        )
        for label, url in pages:
            timings = []
            for _ in range(args.repeat):
                # The query log holds at most 9,000 queries: a full one (after the runs CSV)
                # made every later page count 0 queries and pay for the full log.
                reset_queries()
                with CaptureQueriesContext(connection) as queries:
                    began = time.perf_counter()
                    response = client.get(url)
                    timings.append((time.perf_counter() - began) * 1000)
                # 400: a lead's bill dimension in the explorer (refused, by design); 404: the
                # organisation budget, which a lead may not see.
                assert response.status_code in (200, 400, 403, 404), (url, response.status_code)
            median, worst, first = statistics.median(timings), max(timings), timings[0]
            # A download is every matching row, not a page: timed, not held to the page goal.
            flag = "-" if "format=csv" in url else "ok" if median <= GOAL_MS else "OVER"
            size = len(response.content)
            print(
                f"  {label:<24} {median:8.1f} / {worst:8.1f}  {flag:<4} first {first:8.1f}  "
                f"{len(queries.captured_queries):3d} q  {size / 1024:7.1f} KiB"
                f"{f'  ({response.status_code})' if response.status_code != 200 else ''}"
            )


def _common_tag_key(items: Any) -> str:
    """The tag key most line items of the month carry (the explorer's tag:KEY grouping)."""
    counts: dict[str, int] = {}
    for tags in items.exclude(tags={}).values_list("tags", flat=True)[:2000]:
        for key in tags or {}:
            counts[key] = counts.get(key, 0) + 1
    return max(sorted(counts), key=lambda k: counts[k]) if counts else "team"


def _trend_against_read_time(month: object) -> None:
    """The language team's six-month efficiency trend from the stored rollup against the same
    trend computed at read time (the baseline), in this run."""
    import datetime as dt

    from finops.core.months import month_add
    from finops.economics.selectors import team_efficiency_stored
    from finops.org.models import Team
    from finops.run_metrics.team_efficiency import team_efficiency_by_month

    assert isinstance(month, dt.date)
    team = Team.objects.filter(slug="language").first()
    if team is None:
        return
    months = [month_add(month, -i) for i in range(5, -1, -1)]
    began = time.perf_counter()
    read_time = team_efficiency_by_month(team=team, months=months)
    baseline = time.perf_counter() - began
    began = time.perf_counter()
    stored = team_efficiency_stored(team=team, months=months)
    rollup = time.perf_counter() - began
    same = "the same rows" if stored == read_time else "DIFFERENT rows"
    print(
        f"language team trend, 6 months: read time {baseline * 1000:.0f} ms, stored rollup "
        f"{rollup * 1000:.0f} ms (x{baseline / max(rollup, 1e-9):.0f} faster), {same}"
    )


def _team_energy_against_read_time(month: object) -> None:
    """The month's energy as the pages read it, in this run: the overview's energy card of
    every team and the unowned runs (finance) and the language team's (team page), from the
    stored per-team sums (issue 29), from the stored run rows (the path before them) and at
    read time (the reference); each month the database holds, for the card."""
    import datetime as dt

    from finops.attribution.models import RunCost
    from finops.core.months import month_format
    from finops.economics.energy_selectors import team_month_energy_summed
    from finops.energy.selectors import team_month_energy
    from finops.org.models import Team
    from finops.web.energy_context import (
        energy_card,
        energy_card_of_runs,
        energy_card_read_time,
        team_energy,
        team_energy_of_runs,
    )

    assert isinstance(month, dt.date)

    def timed(read: Any) -> tuple[Any, float]:
        began = time.perf_counter()
        found = read()
        return found, (time.perf_counter() - began) * 1000

    teams = Team.objects.all()
    months = sorted(set(RunCost.objects.values_list("billing_period", flat=True)))
    totals = [0.0, 0.0, 0.0]
    ids: list[int | None] = [*teams.values_list("pk", flat=True), None]
    for each in months:
        stored = team_month_energy_summed(month=each, team_ids=ids) is not None
        reference, read_ms = timed(lambda m=each: energy_card_read_time(
            month=m, teams=teams, include_unowned=True))  # fmt: skip
        summed, summed_ms = timed(lambda m=each: energy_card(
            month=m, teams=teams, include_unowned=True))  # fmt: skip
        # The path before the sums: the card from the stored run rows.
        rows, rows_ms = timed(lambda m=each: energy_card_of_runs(
            month=m, teams=teams, include_unowned=True))  # fmt: skip
        same = "the same figures" if summed == reference == rows else "DIFFERENT figures"
        print(
            f"energy card {month_format(each)} (finance): read time {read_ms:.0f} ms, run rows "
            f"{rows_ms:.0f} ms, per-team sums {summed_ms:.1f} ms"
            f"{'' if stored else ' (NOT STORED: run rows)'} (x{rows_ms / max(summed_ms, 1e-9):.0f}"
            f" faster than the run rows), {same}"
        )
        totals = [totals[0] + read_ms, totals[1] + rows_ms, totals[2] + summed_ms]
    print(
        f"energy card, {len(months)} months: read time {totals[0]:.0f} ms, run rows "
        f"{totals[1]:.0f} ms, per-team sums {totals[2]:.1f} ms"
    )
    team = Team.objects.filter(slug="language").first()
    if team is None:
        return
    read_time, baseline = timed(lambda: team_month_energy(month=month, team_ids=[team.pk]))
    runs, rows_ms = timed(lambda: team_energy_of_runs(team=team, month=month))
    stored_team, summed_ms = timed(lambda: team_energy(team=team, month=month))
    same = "the same figures" if [stored_team] == read_time == [runs] else "DIFFERENT figures"
    print(
        f"language team energy, {month_format(month)}: read time {baseline:.0f} ms, run rows "
        f"{rows_ms:.0f} ms, per-team sums {summed_ms:.1f} ms (x{rows_ms / max(summed_ms, 1e-9):.0f}"
        f" faster than the run rows), {same}"
    )


def _stored_panels_against_read_time(month: object) -> None:
    """The language team's checkpoint advice and idle showback as the pipeline stores them
    (issue 29) against their read-time computation (the baseline), in this run; a month not
    stored (attributed before the store) says so."""
    import datetime as dt

    from finops.attribution.selectors.idle_showback import idle_showback, idle_showback_stored
    from finops.economics.advice_selectors import checkpoint_advice_stored
    from finops.org.models import Team
    from finops.waste.advice import checkpoint_advice

    assert isinstance(month, dt.date)
    teams = Team.objects.filter(slug="language")
    if not teams.exists():
        return
    panels: list[tuple[str, Any, Any]] = [
        ("checkpoint advice",
         lambda: checkpoint_advice(month=month, teams=teams, include_unowned=False),
         lambda: checkpoint_advice_stored(month=month, teams=teams, include_unowned=False)),
        ("idle showback", lambda: idle_showback(month=month, teams=teams),
         lambda: idle_showback_stored(month=month, teams=teams)),
    ]  # fmt: skip
    for label, read_time, stored_read in panels:
        began = time.perf_counter()
        reference = read_time()
        baseline = time.perf_counter() - began
        began = time.perf_counter()
        stored = stored_read()
        rows = time.perf_counter() - began
        if stored is None:
            print(f"language team {label}: not stored (read time {baseline * 1000:.0f} ms)")
            continue
        same = "the same rows" if stored == reference else "DIFFERENT rows"
        print(
            f"language team {label}: read time {baseline * 1000:.0f} ms, stored "
            f"{rows * 1000:.0f} ms (x{baseline / max(rows, 1e-9):.0f} faster), {same}"
        )


if __name__ == "__main__":
    main()
