"""Energy and carbon (issue 32): `ingest_energy`, its join to job attempts, its bad-input rules,
the sourced figures, and who sees what on the API. The hand-worked figures are the scenario
fixtures/scenarios/focus-slurm-energy (README.md there), checked through the API by
tests/test_fixture_scenarios.py; here the same scenario through the command's own output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from billing_ingest.models import ImportBatch, JobRecord
from finops.attribution.models import RunCost
from finops.energy.figures import (
    GPU_POWER,
    PUE,
    REGION_COUNTRY,
    Sourced,
    grid_dataset,
    grid_intensity,
)
from finops.energy.models import JobEnergy
from finops.energy.services import energy_import
from finops.org.models import Profile, Team
from tests.energy_inputs import ENERGY, energy_month

pytestmark = pytest.mark.django_db


# --- the sourced figures -------------------------------------------------------------------------


def _all_figures() -> list[tuple[str, Sourced]]:
    figures: list[tuple[str, Sourced]] = []
    for name, power in GPU_POWER.items():
        figures += [(f"{name} idle", power.idle_w), (f"{name} max", power.max_w)]
    figures += [(f"PUE {key}", value) for key, value in PUE.items()]
    for iso in grid_dataset().rows:
        found = grid_intensity(iso)
        assert found is not None
        figures.append((f"grid {iso}", found))
    return figures


def test_every_power_pue_and_intensity_figure_names_its_source_date_and_licence() -> None:
    figures = _all_figures()
    assert len(figures) > 200  # the grid dataset is read, not empty
    missing = [
        name
        for name, f in figures
        if not (f.source.strip() and f.date.strip() and f.licence.strip()) or f.value <= 0
    ]
    assert not missing, missing
    dataset = grid_dataset()
    assert "Our World in Data" in dataset.source
    assert "CC BY 4.0" in dataset.licence
    # Estimates that rest on an assumption say so in their source.
    assumed = [n for n, f in figures if "ASSUMPTION" in f.source]
    assert assumed
    assert all(n.endswith("idle") for n in assumed)


def test_every_mapped_region_has_a_grid_intensity() -> None:
    missing = {r: c for r, c in REGION_COUNTRY.items() if grid_intensity(c) is None}
    assert not missing


# --- the command ---------------------------------------------------------------------------------


def test_the_scenario_through_the_command_measures_both_attempts_and_the_reset() -> None:
    out = energy_month()
    assert "4 job-node rows" not in out
    assert "2 job-node rows, 2.600000 kWh measured GPU energy" in out, out
    assert "0.000000 kWh outside any job attempt; 1 GPU series with no job" in out, out
    rows = {
        (r.job_id, r.attempt, r.node): (r.joules, r.method)
        for r in JobEnergy.objects.all()
    }  # fmt: skip
    assert rows == {
        # counter 0.7 kWh + power 0.6 kWh
        ("301", 1, "n1"): (Decimal("4680000"), JobEnergy.Method.MIXED),
        # counter 0.7 kWh (with its reset) + counter 0.6 kWh
        ("301", 2, "n2"): (Decimal("4680000"), JobEnergy.Method.COUNTER),
    }


def test_the_same_file_twice_is_a_duplicate_and_keeps_the_rows() -> None:
    energy_month()
    out = StringIO()
    call_command(
        "ingest_energy", "--format", "prometheus", str(ENERGY / "dcgm-energy-hpc.json"),
        "--cluster", "hpc", stdout=out,
    )  # fmt: skip
    assert "skipped, same content" in out.getvalue()
    assert JobEnergy.objects.count() == 2


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_text_sample_without_time_fails_naming_file_line_and_column(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "scrape.prom",
        '# HELP x\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",Hostname="n1",hpc_job="7"} 12345\n',
    )
    with pytest.raises(CommandError) as error:
        call_command("ingest_energy", "--format", "prometheus", str(path), "--cluster", "hpc")
    message = str(error.value)
    assert f"file {path}, row 2, column timestamp" in message, message
    batch = ImportBatch.objects.get(kind=ImportBatch.Kind.ENERGY)
    assert batch.status == ImportBatch.Status.FAILED
    assert "timestamp" in batch.error


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n1",hpc_job="7"} -5 1748944800000', "negative"),
        ('DCGM_FI_DEV_POWER_USAGE{gpu="0",hpc_job="7"} 5 1748944800000', "no node label"),
        ('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n1",pod="p"} 5 1748944800000', "namespace"),
    ],
)
def test_bad_samples_are_named(tmp_path: Path, line: str, needle: str) -> None:
    path = _write(tmp_path / "federate.prom", line + "\n")
    with pytest.raises(CommandError, match=needle) as error:
        call_command("ingest_energy", "--format", "prometheus", str(path), "--cluster", "hpc")
    assert "row 1, column" in str(error.value)


def test_a_file_without_dcgm_energy_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "other.prom", "up 1 1748944800000\n")
    with pytest.raises(CommandError, match="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"):
        call_command("ingest_energy", "--format", "prometheus", str(path), "--cluster", "hpc")


# --- shared GPUs ---------------------------------------------------------------------------------


def _pod(batch: ImportBatch, name: str, gpus: tuple[int, int]) -> None:
    JobRecord.objects.create(
        batch=batch, cluster="k8s", job_id=f"ml/{name}", state="RUNNING",
        start=datetime(2025, 6, 3, 10, tzinfo=UTC), end=datetime(2025, 6, 3, 11, tzinfo=UTC),
        gpus=Decimal(gpus[0]) / gpus[1], gpu_numerator=gpus[0], gpu_denominator=gpus[1],
        nodes=["g1"], namespace="ml",
    )  # fmt: skip


def test_a_shared_gpu_is_split_like_cost(tmp_path: Path) -> None:
    """Two MIG slices (1/7 and 3/7) of one GPU that drew 700 W for an hour (2,520,000 J): each
    pod gets its fraction of the GPU's energy, the 3/7 nobody held stays unattributed."""
    batch = ImportBatch.objects.create(kind="jobs", format="kubernetes", source="k8s")
    _pod(batch, "small", (1, 7))
    _pod(batch, "large", (3, 7))
    series = []
    for pod in ("small", "large"):
        labels = {"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "gpu": "0",
                  "UUID": "GPU-g1-0", "Hostname": "g1", "GPU_I_ID": pod,
                  "exported_namespace": "ml", "exported_pod": pod}  # fmt: skip
        series.append({"metric": labels, "values": [[1748944800, "0"], [1748948400, "2520000000"]]})
    path = tmp_path / "mig.json"
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                             "result": series}}))  # fmt: skip
    done = energy_import(path=path, cluster="k8s")
    rows = dict(JobEnergy.objects.values_list("job_id", "joules"))
    assert rows == {"ml/small": Decimal("360000"), "ml/large": Decimal("1080000")}
    assert done.joules == Decimal("1440000")


# --- the API -------------------------------------------------------------------------------------


def _lead_of(slug: str) -> APIClient:
    user = User.objects.create_user(f"lead-{slug}", password="lead-password-123")
    profile = Profile.objects.create(user=user, role=Profile.Role.TEAM_LEAD)
    profile.teams.add(Team.objects.get(slug=slug))
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_a_lead_sees_the_energy_of_their_teams_only() -> None:
    energy_month()
    api = _lead_of("vision")
    rows = api.get("/api/v1/energy/", {"month": "2025-06"}).json()
    assert [(r["team"], r["gpu_kwh"], r["co2e_kg"]) for r in rows] == [
        ("vision", "2.600000", "1.090315")
    ]
    assert api.get("/api/v1/energy/", {"month": "2025-06", "team": "speech"}).status_code == 404
    eval_run = RunCost.objects.get(run_id="eval")
    assert api.get(f"/api/v1/runs/{eval_run.pk}/").status_code == 404


def test_energy_needs_a_valid_month_and_a_login() -> None:
    assert APIClient().get("/api/v1/energy/", {"month": "2025-06"}).status_code in (401, 403)
    api = _lead_of_new_team()
    assert api.get("/api/v1/energy/").status_code == 400
    assert api.get("/api/v1/energy/", {"month": "2025-13"}).status_code == 400
    assert api.get("/api/v1/energy/", {"month": "2025-06", "team": "a b"}).status_code == 400


def _lead_of_new_team() -> APIClient:
    Team.objects.create(slug="vision", name="Vision")
    return _lead_of("vision")


def test_the_run_detail_names_its_sources(finance_api: APIClient) -> None:
    energy_month()
    run = RunCost.objects.get(run_id="eval")
    energy = finance_api.get(f"/api/v1/runs/{run.pk}/").json()["energy"]
    assert energy["estimated"] is True
    assert "700 W" in energy["power_source"]
    assert "H100" in energy["power_source"]
    assert "Cloud Carbon Footprint" in energy["pue_source"]
    assert "Our World in Data" in energy["grid_source"]
    assert energy["grid_year"] == "2023"
    assert energy["notes"] == []


def test_the_ingest_task_runs_on_the_ingest_queue() -> None:
    from django.conf import settings

    routes = settings.CELERY_TASK_ROUTES
    assert routes["finops.energy.tasks.ingest_energy_file"] == {"queue": "ingest"}


def _slurm_attempt(batch: ImportBatch, attempt: int, start: int, end: int) -> None:
    JobRecord.objects.create(
        batch=batch, cluster="hpc", job_id="55", attempt=attempt, state="COMPLETED",
        start=datetime(2025, 6, 3, start, tzinfo=UTC), end=datetime(2025, 6, 3, end, tzinfo=UTC),
        gpus=Decimal(1), nodes=["n9"],
    )  # fmt: skip


def _one_gpu_file(path: Path, metric: str, points: list[tuple[int, str]]) -> Path:
    labels = {"__name__": metric, "gpu": "0", "UUID": "GPU-n9-0", "Hostname": "n9",
              "hpc_job": "55"}  # fmt: skip
    values = [[1748944800 + seconds, value] for seconds, value in points]  # from 10:00
    document = {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": labels, "values": values}]},
    }
    path.write_text(json.dumps(document))  # fmt: skip
    return path


def test_attempts_on_the_same_node_are_told_apart_by_time(tmp_path: Path) -> None:
    """A job requeued onto the same node: attempt 1 10:00-11:00, attempt 2 12:00-13:00. The
    counter rose 3,600 J an hour throughout: each attempt gets its hour, the hour between them
    (the GPU idle between the attempts, still labelled with the job) is outside both."""
    batch = ImportBatch.objects.create(kind="jobs", format="slurm", source="hpc")
    _slurm_attempt(batch, 1, 10, 11)
    _slurm_attempt(batch, 2, 12, 13)
    points = [(h * 1800, str(h * 1800 * 1000)) for h in range(7)]  # 10:00 .. 13:00, 1 W
    done = energy_import(
        path=_one_gpu_file(tmp_path / "c.json", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", points),
        cluster="hpc",
    )
    rows = dict(JobEnergy.objects.values_list("attempt", "joules"))
    assert rows == {1: Decimal("3600"), 2: Decimal("3600")}
    assert done.joules_outside_jobs == Decimal("3600")


def test_power_is_not_integrated_over_a_gap(tmp_path: Path) -> None:
    """300 W at 10:00, 10:05 and 10:50 (a 45-minute gap: the exporter was down), job 10-11:
    only the 5 minutes between the first two samples count (300 W x 300 s)."""
    batch = ImportBatch.objects.create(kind="jobs", format="slurm", source="hpc")
    _slurm_attempt(batch, 1, 10, 11)
    points = [(0, "300"), (300, "300"), (3000, "300")]
    energy_import(
        path=_one_gpu_file(tmp_path / "p.json", "DCGM_FI_DEV_POWER_USAGE", points), cluster="hpc"
    )
    assert JobEnergy.objects.get().joules == Decimal("90000")


def test_a_months_team_sums_take_a_fixed_number_of_queries(
    django_assert_max_num_queries: Any,
) -> None:
    from finops.energy.selectors import team_month_energy

    energy_month()
    ids = [*Team.objects.values_list("pk", flat=True), None]
    # ledger, jobs, energy + utilisation per cluster, line items, the teams, the PUE setting
    with django_assert_max_num_queries(8):
        rows = team_month_energy(month=datetime(2025, 6, 1, tzinfo=UTC).date(), team_ids=ids)
    assert [(r.team, r.runs, r.co2e_kg) for r in rows] == [
        ("speech", 1, Decimal("0.587093")),
        ("vision", 1, Decimal("1.090315")),
    ]


# --- the scheduled fetch from Prometheus' HTTP API ----------------------------------------------


@pytest.fixture
def prometheus() -> Iterator[tuple[str, list[dict[str, list[str]]]]]:
    """A local HTTP server answering /api/v1/query_range with the scenario's series of the
    metric asked for (the range is recorded, not applied)."""
    import threading
    import urllib.parse
    from http.server import BaseHTTPRequestHandler, HTTPServer

    series = json.loads((ENERGY / "dcgm-energy-hpc.json").read_text())["data"]["result"]
    asked: list[dict[str, list[str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            asked.append(query)
            result = [s for s in series if s["metric"]["__name__"] == query["query"][0]]
            body = json.dumps(
                {"status": "success", "data": {"resultType": "matrix", "result": result}}
            ).encode()
            self.send_response(200 if url.path == "/api/v1/query_range" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", asked
    server.shutdown()


def test_the_scheduled_fetch_imports_what_prometheus_answers(
    prometheus: tuple[str, list[dict[str, list[str]]]], settings: Any, tmp_path: Path
) -> None:
    from finops.energy.tasks import fetch_energy_all

    url, asked = prometheus
    settings.FINOPS_DATA_DIR = tmp_path
    settings.FINOPS_ENERGY_PROMETHEUS = {"hpc": url}
    energy_month()
    JobEnergy.objects.all().delete()
    result = fetch_energy_all.delay().get()
    assert result == {"hpc": {"status": "succeeded", "error": "", "rows": 2}}
    assert sum(JobEnergy.objects.values_list("joules", flat=True)) == Decimal("9360000")
    # Both metrics, over the last 35 days at a step under 11,000 points a series.
    assert sorted(q["query"][0] for q in asked) == [
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    ]
    start, end, step = (int(asked[0][k][0]) for k in ("start", "end", "step"))
    assert end - start == 35 * 86400
    assert (end - start) / step <= 11000
    assert len(list((tmp_path / "energy").glob("hpc-*.json"))) == 1


def test_an_unreachable_server_is_reported_and_others_still_fetched(
    prometheus: tuple[str, list[dict[str, list[str]]]], settings: Any, tmp_path: Path
) -> None:
    from finops.energy.tasks import fetch_energy_all

    url, _ = prometheus
    settings.FINOPS_DATA_DIR = tmp_path
    settings.FINOPS_ENERGY_PROMETHEUS = {"down": "http://127.0.0.1:9/", "hpc": url}
    energy_month()
    result = fetch_energy_all.delay().get()
    assert result["down"]["status"] == "failed"
    assert "127.0.0.1:9" in result["down"]["error"]
    assert result["hpc"]["status"] in ("succeeded", "duplicate")


def test_a_job_across_a_months_end_puts_each_month_its_share() -> None:
    from finops.energy.selectors import month_share

    start = datetime(2025, 6, 30, 22, tzinfo=UTC)
    end = datetime(2025, 7, 1, 2, tzinfo=UTC)
    june, july = datetime(2025, 6, 1).date(), datetime(2025, 7, 1).date()
    assert month_share(start, end, [june]) == Decimal("0.5")
    assert month_share(start, end, [july]) == Decimal("0.5")
    assert month_share(start, end, [june, july]) == Decimal(1)
    december = datetime(2025, 12, 1).date()
    assert month_share(datetime(2025, 12, 31, 23, tzinfo=UTC), None, [december]) < 1


def test_energy_in_a_region_with_no_grid_figure_is_left_out_of_co2e_and_said(
    finance_api: APIClient,
) -> None:
    """n1 (attempt 1 of pretrain, 1.3 kWh measured) moved to a region the dataset does not know:
    facility 1.3 x 1.135 = 1.4755 kWh has no CO2e; n2's 1.4755 kWh x 369.473 / 1000 =
    0.5451574... -> 0.545157 kg is counted, and the rest is named."""
    from billing_ingest.models import CostLineItem

    energy_month()
    CostLineItem.objects.filter(resource_name="n1").update(region_id="mars-1")
    run = RunCost.objects.get(run_id="pretrain")
    energy = finance_api.get(f"/api/v1/runs/{run.pk}/").json()["energy"]
    assert energy["gpu_kwh"] == "2.600000"
    assert energy["co2e_kg"] == "0.545157"
    assert energy["co2e_missing_kwh"] == "1.475500"
    assert energy["grid_g_per_kwh"] is None  # two parts: each names its own
    assert any("region mars-1" in note for note in energy["notes"])
    assert [p.get("co2e_kg") for p in energy["parts"]] == [None, "0.545157"]
