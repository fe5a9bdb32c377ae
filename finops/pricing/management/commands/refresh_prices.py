"""refresh_prices --provider {aws,gcp,azure}: read the provider's price catalogue into the price
table (InstancePrice), each figure with its source and fetch date.

GCP bills a GPU machine as separate SKUs (each GPU per GPU-hour, the vCPUs, the memory): the SKU
tiers are stored (SkuPrice) and each machine's price is composed from them (gcp_machines) for
the shapes recorded in the snapshot. This is the one GCP price command (it replaced
load_gcp_prices, which stored the SKU tiers alone).

Thin: read every figure first, then store them in one service call; nothing is stored when a
read fails. Without --instance-type, the types (and regions) of the shipped snapshot are
refreshed. The snapshot stays the fallback for every figure no refresh has found.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from finops.core.wording import counted
from finops.pricing import catalogues, gcp_catalog, gcp_machines, snapshot
from finops.pricing.services import gcp_prices_store, instance_prices_store

AZURE_TIMEOUT_SECONDS = 30


class Command(BaseCommand):
    help = "Refresh GPU instance prices from a provider's catalogue (AWS, GCP or Azure)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--provider", required=True, choices=["aws", "gcp", "azure"])
        parser.add_argument(
            "--instance-type", action="append", default=[], dest="instance_types",
            help="repeatable; default: the provider's types in the shipped price snapshot",
        )  # fmt: skip
        parser.add_argument("--region", help="default: each type's region in the snapshot")
        parser.add_argument(
            "--endpoint-url", help="AWS Price List API endpoint (default: AWS's, us-east-1)"
        )
        parser.add_argument(
            "--azure-url", default=catalogues.AZURE_URL, help="Azure Retail Prices API URL"
        )
        parser.add_argument(
            "--from-file", type=Path, help="GCP: a saved Cloud Catalog skus.list response"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        provider: str = options["provider"]
        targets = _targets(provider, options["instance_types"], options["region"])
        if not targets:
            raise CommandError(f"no {provider} instance types to refresh")
        if provider == "gcp":
            if not options["instance_types"]:
                # The snapshot's GCP types whose machine shape is recorded (a type without one
                # cannot be composed from SKUs: its entry's note says why).
                shapes = _gcp_shapes()
                for instance_type, _ in targets:
                    if instance_type.lower() not in shapes:
                        self.stdout.write(f"{instance_type}: no machine shape recorded, skipped")
                targets = [t for t in targets if t[0].lower() in shapes]
            self._gcp(targets, options["from_file"])
            return
        now = timezone.now()
        try:
            if provider == "aws":
                figures = _aws(targets, options["endpoint_url"], now)
            else:
                figures = _azure(targets, options["azure_url"])
        except catalogues.CatalogueError as exc:
            raise CommandError(str(exc)) from None
        stored = instance_prices_store(figures=figures, fetched_at=now)
        self.stdout.write(
            f"{counted(stored, provider + ' price')} stored for {counted(len(targets), 'type')}"
        )
        found = {(f.instance_type.lower(), f.region) for f in figures}
        for instance_type, region in targets:
            if (instance_type.lower(), region) not in found:
                self.stdout.write(f"no price found for {instance_type} in {region}")

    def _gcp(self, targets: list[tuple[str, str]], path: Path | None) -> None:
        shapes = _gcp_shapes()
        unknown = sorted(t for t, _ in targets if t.lower() not in shapes)
        if unknown:
            raise CommandError(
                f"no machine shape (GPUs, vCPUs, memory) recorded for {', '.join(unknown)}; "
                f"known: {', '.join(sorted(shapes))}"
            )
        service = gcp_catalog.COMPUTE_ENGINE_SERVICE
        try:
            if path is not None:
                tiers = gcp_catalog.file_tiers(path=path, service_id=service)
            else:
                client = gcp_catalog.catalog_client()
                tiers = gcp_catalog.catalog_tiers(client=client, service_id=service)
        except gcp_catalog.CatalogError as exc:
            raise CommandError(str(exc)) from None
        if not tiers:
            raise CommandError(f"no SKU prices in {path or f'services/{service}'}")
        figures, notes = [], []
        for instance_type, region in targets:
            made = gcp_machines.compose(
                tiers=tiers, shape=shapes[instance_type.lower()], region=region
            )
            figures += made.figures
            for usage_type, absent in made.missing.items():
                notes.append(
                    f"no {usage_type} price for {instance_type} in {region}: "
                    f"no SKU for {', '.join(absent)}"
                )
        count, composed = gcp_prices_store(tiers=tiers, figures=figures, fetched_at=timezone.now())
        self.stdout.write(f"{counted(count, 'gcp price tier')} stored from {path or service}")
        self.stdout.write(
            f"{counted(composed, 'gcp machine price')} stored for {counted(len(targets), 'type')}"
        )
        for note in notes:
            self.stdout.write(note)


def _gcp_shapes() -> dict[str, gcp_machines.MachineShape]:
    entries = [e for e in snapshot.snapshot()["prices"] if e["provider"] == "gcp"]
    shapes = (gcp_machines.shape_of(entry) for entry in entries)
    return {shape.instance_type.lower(): shape for shape in shapes if shape is not None}


def _targets(provider: str, instance_types: list[str], region: str | None) -> list[tuple[str, str]]:
    entries = [e for e in snapshot.snapshot()["prices"] if e["provider"] == provider]
    if instance_types:
        # A named type is read in its snapshot region (a3-highgpu-8g: us-east4), else the
        # provider's usual one.
        listed: dict[str, str] = {}
        for entry in entries:  # a type listed in several regions: its first one
            listed.setdefault(entry["instance_type"].lower(), entry["region"])
        default_region = {"aws": "us-east-1", "gcp": "us-central1"}.get(provider, "eastus")
        return [(t, region or listed.get(t.lower(), default_region)) for t in instance_types]
    return [(e["instance_type"], region or e["region"]) for e in entries]


def _aws(targets: list[tuple[str, str]], endpoint_url: str | None, now: Any) -> list[Any]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    figures = []
    try:
        pricing = boto3.client("pricing", region_name="us-east-1", endpoint_url=endpoint_url)
        for instance_type, region in targets:
            figures += catalogues.aws_prices(
                client=pricing, instance_type=instance_type, region=region
            )
            ec2 = boto3.client("ec2", region_name=region)
            spot = catalogues.aws_spot(
                client=ec2, instance_type=instance_type, region=region, now=now
            )
            if spot is not None:
                figures.append(spot)
    except (BotoCoreError, ClientError) as exc:
        raise catalogues.CatalogueError(f"AWS price catalogue: {exc}") from None
    return figures


def _azure(targets: list[tuple[str, str]], url: str) -> list[Any]:
    import requests

    def fetch(page_url: str) -> dict[str, Any]:
        try:
            response = requests.get(page_url, timeout=AZURE_TIMEOUT_SECONDS)
            response.raise_for_status()
            return dict(response.json())
        except (requests.RequestException, ValueError) as exc:
            raise catalogues.CatalogueError(f"Azure Retail Prices API: {exc}") from None

    figures = []
    for instance_type, region in targets:
        figures += catalogues.azure_prices(
            fetch=fetch, instance_type=instance_type, region=region, url=url
        )
    return figures
