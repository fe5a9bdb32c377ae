"""Dump what the demo computed, sorted, to compare two builds of it (a speed-up must change no
figure):

    DATABASE_URL=sqlite:////tmp/a.sqlite3 python scripts/demo_dump.py /tmp/a.json
    DATABASE_URL=sqlite:////tmp/b.sqlite3 python scripts/demo_dump.py /tmp/b.json
    diff /tmp/a.json /tmp/b.json   # or: python scripts/demo_dump.py --diff /tmp/a.json /tmp/b.json

One line per row, tables in a fixed order, rows sorted: the ingested ledger and jobs, the
attributed ledger (AllocatedCost, RunCost, TeamDailyCost), RunEconomics, endpoint costs,
budget evaluations and alerts, anomalies and their drivers, recommendations, run metrics and
the queued emails. Left out: the row ids and the moments a row was written (auto_now /
auto_now_add, and the few run-time stamps named in VOLATILE), which differ between any two runs;
FINOPS_DATA_DIR is written <FINOPS_DATA_DIR> (each build has its own).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# app_label.Model, in the order written.
TABLES = (
    "billing_ingest.CostLineItem",
    "billing_ingest.JobRecord",
    "billing_ingest.JobGpuUtilisation",
    "inference.InferenceUsage",
    "run_metrics.TrainingRun",
    "run_metrics.RunMetricPoint",
    "attribution.AllocatedCost",
    "attribution.RunCost",
    "attribution.TeamDailyCost",
    "economics.RunEconomics",
    "inference.EndpointCost",
    "budgets.Budget",
    "budgets.BudgetEvaluation",
    "budgets.BudgetAlert",
    "anomalies.Anomaly",
    "anomalies.AnomalyDriver",
    "pricing.Recommendation",
    "pricing.RecommendationMonth",
    "notifications.EmailNotification",
)
# Wall-clock stamps that are not auto_now fields (when a row was sent, claimed, evaluated), and
# the recommendations' input fingerprint (it holds the moments its inputs were written).
VOLATILE = frozenset(
    {"sent_at", "claimed_at", "evaluated_at", "detected_at", "computed_at", "created", "updated",
     "imported_at", "pricing.RecommendationMonth.inputs"}
)  # fmt: skip


def _fields(model: Any) -> list[str]:
    names = []
    for field in model._meta.concrete_fields:
        if field.primary_key or {field.name, f"{model._meta.label}.{field.name}"} & VOLATILE:
            continue
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            continue
        names.append(field.attname)
    return names


def _lines(label: str) -> Iterator[str]:
    from django.apps import apps
    from django.conf import settings

    model = apps.get_model(label)
    names = _fields(model)
    # Two builds in two data folders name the same files: the folder is left out.
    folder = str(settings.FINOPS_DATA_DIR)
    rows = [
        json.dumps(dict(zip(names, values, strict=True)), default=str, sort_keys=True).replace(
            folder, "<FINOPS_DATA_DIR>"
        )
        for values in model.objects.order_by().values_list(*names).iterator(chunk_size=5000)
    ]
    rows.sort()
    yield f"## {label} {len(rows)} rows"
    yield from rows


def dump(path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        for label in TABLES:
            for line in _lines(label):
                out.write(line + "\n")


def diff(first: Path, second: Path) -> int:
    """Per table: rows only in the first dump, only in the second; 0 when identical."""

    def tables(path: Path) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        current = ""
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("## "):
                    current = line.split()[1]
                    found[current] = set()
                else:
                    found[current].add(line)
        return found

    a, b = tables(first), tables(second)
    differing = 0
    for label in TABLES:
        left, right = a.get(label, set()), b.get(label, set())
        only_a, only_b = left - right, right - left
        status = "same" if not only_a and not only_b else "DIFFERENT"
        differing += status != "same"
        print(f"{label:<36} {len(left):>9,} rows  {status}", end="")
        print(f" (-{len(only_a):,} +{len(only_b):,})" if status != "same" else "")
        for line in sorted(only_a)[:3]:
            print(f"   - {line[:300]}")
        for line in sorted(only_b)[:3]:
            print(f"   + {line[:300]}")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--diff", action="store_true", help="compare two dumps")
    args = parser.parse_args()
    if args.diff:
        return diff(*args.paths)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    dump(args.paths[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
