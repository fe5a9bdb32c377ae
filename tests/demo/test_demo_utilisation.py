"""The demo's measured GPU utilisation of its serving pods (finops/demo/utilisation.py): one CSV
per cluster of the pods that started in the month, each value in its endpoint's range, pods
already measured left out; the CSV imports as a team's would."""

from __future__ import annotations

import csv
import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from billing_ingest.models import ImportBatch, JobGpuUtilisation, JobRecord
from billing_ingest.services.utilisation import utilisation_import
from finops.demo.fleet import Month
from finops.demo.utilisation import serving_utilisation_files

pytestmark = pytest.mark.django_db


def test_serving_pods_of_the_month_get_a_utilisation_in_their_endpoints_range(
    tmp_path: Path,
) -> None:
    batch = ImportBatch.objects.create(
        kind="jobs", format="kubernetes", source="k8s", file_name="p", status="succeeded"
    )
    june = dt.datetime(2026, 6, 2, tzinfo=dt.UTC)
    pods = [
        ("llm/llama-1", "llama-70b-chat", june),
        ("llm/mistral-1", "mistral-7b-chat", june),
        ("llm/llama-may", "llama-70b-chat", june - dt.timedelta(days=5)),  # May: not June's
        ("llm/train-1", "", june),  # not serving
        ("llm/llama-done", "llama-70b-chat", june),  # measured already
    ]
    for job_id, endpoint, start in pods:
        JobRecord.objects.create(
            batch=batch, cluster="k8s", job_id=job_id, account="llm", state="RUNNING",
            start=start, gpus=8, nodes=["n1"], endpoint=endpoint,
        )  # fmt: skip
    JobGpuUtilisation.objects.create(
        cluster="k8s", job_id="llm/llama-done", utilisation=Decimal("0.5"), batch=batch
    )
    [(cluster, path)] = serving_utilisation_files(month=Month(2026, 6), out=tmp_path)
    assert (cluster, path) == ("k8s", tmp_path / "2026-06" / "utilisation" / "k8s.csv")
    with path.open(encoding="utf-8") as handle:
        rows = {row["job_id"]: Decimal(row["utilisation"]) for row in csv.DictReader(handle)}
    assert set(rows) == {"llm/llama-1", "llm/mistral-1"}
    assert Decimal("0.12") <= rows["llm/llama-1"] <= Decimal("0.19")
    assert Decimal("0.45") <= rows["llm/mistral-1"] <= Decimal("0.60")
    # The same pods measure the same in a rebuilt demo.
    [(_, again)] = serving_utilisation_files(month=Month(2026, 6), out=tmp_path / "again")
    assert again.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    assert utilisation_import(path=path, cluster="k8s").rows == 2
