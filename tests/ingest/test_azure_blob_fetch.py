"""ingest_billing with an az:// URI, end to end against Azurite (the Azure Storage emulator):
Azure cost exports laid out as Cost Management writes them (<export>/<date range>/<run>/parts
plus manifest.json), the newest run per date range, restatement, a missing blob, refused
credentials, a hostile blob name, and scheduled fetches skipping runs already imported.

Azurite is found at $AZURITE_BLOB, <project>/.azurite/node_modules/.bin/azurite-blob, or on PATH;
without it these tests skip, unless FINOPS_REQUIRE_AZURITE=1 (CI), where they fail instead."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import BillingSource, CostLineItem, ImportBatch
from billing_ingest.sources import azure_blob
from billing_ingest.tasks.sources import fetch_billing_source
from tests.clock import Clock

if TYPE_CHECKING:  # the module itself is imported or skipped below
    from azure.storage.blob import ContainerClient

blob = pytest.importorskip("azure.storage.blob")

pytestmark = pytest.mark.django_db

PROJECT = Path(__file__).resolve().parents[2]
ACCOUNT = "devstoreaccount1"
# Azurite's documented well-known development key (not a secret).
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONTAINER = "costs"
ROOT = "exports/gpu-actual"
URI = f"az://{CONTAINER}/exports"
SOURCE = f"azure:az://{CONTAINER}/{ROOT}"
SEPTEMBER = "20240901-20240930"
OCTOBER = "20241001-20241031"

HEADER = (
    "BillingAccountId,BillingPeriodStartDate,BillingPeriodEndDate,SubscriptionId,Date,"
    "MeterCategory,MeterName,Quantity,CostInBillingCurrency,BillingCurrency,ChargeType,"
    "PricingModel,ResourceId\r\n"
)


def azure_part(start: str, costs: list[str], *, bom: bool = True) -> bytes:
    year, month = start[:4], start[4:6]
    rows = "".join(
        f"8611537,{year}-{month}-01,{year}-{month}-28,sub-1,{year}-{month}-{day + 1:02d},"
        f"Virtual Machines,ND96isr H100 v5,1,{cost},USD,Usage,OnDemand,/subscriptions/sub-1/vm{day}"
        "\r\n"
        for day, cost in enumerate(costs)
    )
    text = ("\ufeff" if bom else "") + HEADER + rows
    return gzip.compress(text.encode())


def _azurite_binary() -> str | None:
    candidates = [
        os.environ.get("AZURITE_BLOB", ""),
        str(PROJECT / ".azurite" / "node_modules" / ".bin" / "azurite-blob"),
        shutil.which("azurite-blob") or "",
    ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _unavailable(reason: str) -> None:
    if os.environ.get("FINOPS_REQUIRE_AZURITE") == "1":
        pytest.fail(f"FINOPS_REQUIRE_AZURITE=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _azurite_binary()
    if binary is None or shutil.which("node") is None:
        _unavailable("node or azurite-blob is not installed")
    assert binary is not None
    port = _free_port()
    workspace = tmp_path_factory.mktemp("azurite")
    process = subprocess.Popen(
        [
            binary,
            "--silent",
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--location",
            str(workspace),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                error = process.stderr.read() if process.stderr else b""
                _unavailable(f"azurite-blob did not start: {error!r}")
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/{ACCOUNT}"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def blob_clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Azurite stamps Last-Modified with its own clock, to the second, so runs written within one
    second would tie. With this fixture the listing the code reads shows each blob uploaded here
    at the Clock's time instead, and the test ticks the Clock rather than sleeping."""
    clock = Clock(datetime(2024, 10, 2, 8, tzinfo=UTC))
    stamps: dict[str, datetime] = {}
    upload, listing = blob.ContainerClient.upload_blob, blob.ContainerClient.list_blobs

    def upload_blob(self: ContainerClient, name: str, *args: Any, **kwargs: Any) -> Any:
        result = upload(self, name, *args, **kwargs)
        stamps[name] = clock.now
        return result

    def list_blobs(self: ContainerClient, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for item in listing(self, *args, **kwargs):
            item.last_modified = stamps.get(item.name, item.last_modified)
            yield item

    monkeypatch.setattr(blob.ContainerClient, "upload_blob", upload_blob)
    monkeypatch.setattr(blob.ContainerClient, "list_blobs", list_blobs)
    return clock


def connection_string(endpoint: str, key: str = DEV_KEY) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};"
        f"BlobEndpoint={endpoint};"
    )


@pytest.fixture
def container(azurite: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ContainerClient]:
    conn = connection_string(azurite)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    client = blob.ContainerClient.from_connection_string(conn, CONTAINER)
    client.create_container()
    yield client
    client.delete_container()


def run(
    container: ContainerClient,
    date_range: str,
    parts: list[list[str]],
    *,
    manifest: bool = True,
    skip: int | None = None,
) -> list[str]:
    """Write one export run as Cost Management does: parts, then manifest.json last."""
    run_folder = f"{ROOT}/{date_range}/{uuid.uuid4()}"
    names = [f"{run_folder}/part_0_{i + 1:04d}.csv.gz" for i in range(len(parts))]
    for index, (name, costs) in enumerate(zip(names, parts, strict=True)):
        if index != skip:
            container.upload_blob(name, azure_part(date_range, costs, bom=index == 0))
    if manifest:
        document = {
            "manifestVersion": "2024-04-01",
            "blobCount": len(names),
            "exportConfig": {"exportName": "gpu-actual", "type": "ActualCost"},
            "deliveryConfig": {"partitionData": True, "fileFormat": "Csv"},
            "runInfo": {"runId": run_folder.rsplit("/", 1)[1]},
            "blobs": [{"blobName": name} for name in names],
        }
        container.upload_blob(f"{run_folder}/manifest.json", json.dumps(document).encode())
    return names


def ingest(uri: str = URI, *args: str) -> str:
    out = io.StringIO()
    call_command(
        "ingest_billing",
        "--format",
        "azure",
        uri,
        "--no-attribute",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def month_total(month: str) -> Decimal:
    rows = CostLineItem.objects.filter(source=SOURCE, billing_period=f"{month}-01")
    return sum((row.billed_cost for row in rows), Decimal(0))


def costs_sum(parts: list[list[str]]) -> Decimal:
    return sum((Decimal(c) for part in parts for c in part), Decimal(0))


def ledger() -> list[tuple[int, str, str, str]]:
    rows = CostLineItem.objects.order_by("id")
    return [(r.batch_id, r.source, str(r.billing_period), str(r.billed_cost)) for r in rows]


def test_newest_run_per_date_range_is_one_batch(
    container: ContainerClient, blob_clock: Clock
) -> None:
    run(container, SEPTEMBER, [["100.00"]])
    blob_clock.tick()  # a later Last-Modified, without waiting for it
    newest = [["1.50", "2.25"], ["3.125"]]
    run(container, SEPTEMBER, newest)
    blob_clock.tick()  # a later Last-Modified, without waiting for it
    # Still being written (no manifest yet): not the data of the month.
    run(container, SEPTEMBER, [["999.00"]], manifest=False)
    october = [["7.00"]]
    run(container, OCTOBER, october)

    ingest()

    batches = ImportBatch.objects.order_by("id")
    assert [(b.source, b.status, b.billing_periods) for b in batches] == [
        (SOURCE, ImportBatch.Status.SUCCEEDED, ["2024-09"]),
        (SOURCE, ImportBatch.Status.SUCCEEDED, ["2024-10"]),
    ]
    assert batches[0].row_count == 3
    assert month_total("2024-09") == costs_sum(newest)
    assert month_total("2024-10") == costs_sum(october)


def test_runs_without_manifests_take_the_newest_run(
    container: ContainerClient, blob_clock: Clock
) -> None:
    run(container, SEPTEMBER, [["1.00"]], manifest=False)
    blob_clock.tick()  # a later Last-Modified, without waiting for it
    newest = [["2.00"], ["3.00"]]
    run(container, SEPTEMBER, newest, manifest=False)

    ingest()

    assert month_total("2024-09") == costs_sum(newest)


def test_a_new_run_restates_the_month(container: ContainerClient, blob_clock: Clock) -> None:
    run(container, SEPTEMBER, [["1.00"], ["2.00"]])
    ingest()
    old = ImportBatch.objects.get()

    blob_clock.tick()  # a later Last-Modified, without waiting for it
    restated = [["10.00"], ["20.00"], ["30.00"]]
    run(container, SEPTEMBER, restated)
    ingest()

    old.refresh_from_db()
    assert old.status == ImportBatch.Status.SUPERSEDED
    assert month_total("2024-09") == costs_sum(restated)
    assert CostLineItem.objects.count() == 3


def test_a_blob_missing_from_the_manifest_fails_and_keeps_old_data(
    container: ContainerClient, blob_clock: Clock
) -> None:
    run(container, SEPTEMBER, [["1.00"], ["2.00"]])
    ingest()
    before = ledger()

    blob_clock.tick()  # a later Last-Modified, without waiting for it
    names = run(container, SEPTEMBER, [["10.00"], ["20.00"]], skip=1)
    with pytest.raises(CommandError) as raised:
        ingest()

    assert f"az://{CONTAINER}/{names[1]}" in str(raised.value)
    assert "not in the container" in str(raised.value)
    failed = ImportBatch.objects.get(status=ImportBatch.Status.FAILED)
    assert f"az://{CONTAINER}/{names[1]}" in failed.error
    assert ledger() == before


def test_a_wrong_account_key_is_refused_before_anything_changes(
    container: ContainerClient, azurite: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(container, SEPTEMBER, [["1.00"]])
    ingest()
    before = ledger()
    batches = ImportBatch.objects.count()
    wrong = "A" * 86 + "=="
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection_string(azurite, wrong))

    with pytest.raises(CommandError, match="cannot read az://costs/exports") as raised:
        ingest()

    assert "AuthorizationFailure" in str(raised.value)
    assert ledger() == before
    assert ImportBatch.objects.count() == batches


def test_a_missing_container_is_refused(container: ContainerClient) -> None:
    with pytest.raises(CommandError, match="ContainerNotFound"):
        ingest("az://no-such-container/exports")
    assert not ImportBatch.objects.exists()


def test_no_connection_string_is_a_clear_error(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    with pytest.raises(CommandError, match="set AZURE_STORAGE_CONNECTION_STRING"):
        ingest()


def test_a_hostile_blob_name_cannot_write_outside_the_download_folder(
    container: ContainerClient, tmp_path: Path
) -> None:
    # Blob names may start with "/": joined to the download folder as a path, this run's part
    # would be written to the absolute path of a file outside it.
    outside = tmp_path / "outside"
    root = f"{outside}/{ROOT}".removeprefix("/")
    name = f"/{root}/{SEPTEMBER}/run-1/part_0_0001.csv.gz"
    costs = [["4.50", "0.25"]]
    container.upload_blob(name, azure_part(SEPTEMBER, costs[0]))

    ingest(f"az://{CONTAINER}")

    assert not outside.exists()
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert batch.parts.get().label == f"az://{CONTAINER}/{name}"
    rows = CostLineItem.objects.filter(source=batch.source)
    assert sum((row.billed_cost for row in rows), Decimal(0)) == costs_sum(costs)


def test_a_scheduled_fetch_downloads_only_runs_it_has_not_imported(
    container: ContainerClient, monkeypatch: pytest.MonkeyPatch, blob_clock: Clock
) -> None:
    downloads: list[str] = []
    original = azure_blob.azure_export_fetch

    def recording(*, container: ContainerClient, plan: Any, dest: Path) -> Any:
        downloads.append(plan.run)
        return original(container=container, plan=plan, dest=dest)

    monkeypatch.setattr(azure_blob, "azure_export_fetch", recording)
    run(container, SEPTEMBER, [["1.00"], ["2.00"]])
    run(container, OCTOBER, [["3.00"]])
    source = BillingSource.objects.create(name="azure", format="azure", uri=URI)
    fetch_billing_source.delay(source.pk).get(timeout=60)
    assert len(downloads) == 2

    fetch_billing_source.delay(source.pk).get(timeout=60)
    source.refresh_from_db()
    assert len(downloads) == 2
    assert source.last_message == "unchanged 2024-09, 2024-10"
    assert ImportBatch.objects.count() == 2

    blob_clock.tick()  # a later Last-Modified, without waiting for it
    restated = [["10.00"]]
    names = run(container, SEPTEMBER, restated)
    fetch_billing_source.delay(source.pk).get(timeout=60)
    source.refresh_from_db()

    assert downloads[2:] == [names[0].rsplit("/", 1)[0]]
    assert source.last_message == "imported 2024-09; unchanged 2024-10"
    assert month_total("2024-09") == costs_sum(restated)
