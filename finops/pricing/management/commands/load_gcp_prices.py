"""load_gcp_prices [--service ID] [--from-file JSON]: GCP Cloud Catalog SKU prices into SkuPrice.

Thin: read the catalogue (API or saved skus.list response), store it in one service call.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from finops.pricing import gcp_catalog
from finops.pricing.services import sku_prices_store


class Command(BaseCommand):
    help = (
        "Load GCP Cloud Catalog SKU prices (every tier, exact units + nanos) for one service, "
        "from the API (Application Default Credentials) or from a saved skus.list response."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--service",
            default=gcp_catalog.COMPUTE_ENGINE_SERVICE,
            help="Cloud Catalog service id (default 6F81-5844-456A, Compute Engine)",
        )
        parser.add_argument(
            "--from-file",
            type=Path,
            help="a saved skus.list JSON response to load instead of calling the API",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        service_id: str = options["service"]
        path: Path | None = options["from_file"]
        try:
            if path is not None:
                tiers = gcp_catalog.file_tiers(path=path, service_id=service_id)
            else:
                client = gcp_catalog.catalog_client()
                tiers = gcp_catalog.catalog_tiers(client=client, service_id=service_id)
        except gcp_catalog.CatalogError as exc:
            raise CommandError(str(exc)) from None
        if not tiers:
            raise CommandError(f"no SKU prices in {path or f'services/{service_id}'}")
        count = sku_prices_store(
            provider=gcp_catalog.PROVIDER, tiers=tiers, fetched_at=timezone.now()
        )
        skus = len({tier.sku_id for tier in tiers})
        self.stdout.write(
            f"{count} price tier(s) of {skus} SKU(s) stored from {path or service_id}"
        )
