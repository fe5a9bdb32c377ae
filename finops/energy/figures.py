"""Every published figure energy and carbon are computed from, each with its source, date and
licence (DESIGN section 9; a test checks that none is missing).

- GPU power per model: `max_w` is the board's maximum power (TDP) from NVIDIA's datasheet;
  `idle_w` the measured idle draw where a dataset publishes one (Cloud Carbon Footprint's
  minimum watts), else an ASSUMPTION (10 % of the maximum) said so in its source. Used only to
  ESTIMATE a job no DCGM measurement covers: idle + utilisation x (max - idle).
- PUE per provider (and region where published): Cloud Carbon Footprint's coefficients, which
  take the providers' published figures (Google's trailing-twelve-month PUE per campus, AWS's
  and Microsoft's fleet averages). Unknown provider or on-prem: the pricing settings' PUE.
- Grid intensity per country (g CO2e/kWh, location-based): Our World in Data's energy dataset
  (data/grid_intensity.csv, CC BY 4.0), with the year of each figure. A cloud region maps to the
  country it is in (REGION_COUNTRY: public region locations, not a figure).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True, slots=True)
class Sourced:
    """A figure and where it comes from."""

    value: Decimal
    source: str
    # When the figure was published or the dataset version is dated (YYYY or YYYY-MM-DD).
    date: str
    licence: str


@dataclass(frozen=True, slots=True)
class GpuPower:
    model: str
    idle_w: Sourced
    max_w: Sourced


# --- GPU power --------------------------------------------------------------------------------

_CCF = (
    "Cloud Carbon Footprint, packages/aws/src/domain/AwsFootprintEstimationConstants.ts "
    "MIN_WATTS / MAX_WATTS_BY_COMPUTE_PROCESSOR (github.com/cloud-carbon-footprint, "
    "commit 122a142)"
)
_CCF_DATE = "2023-05-19"
_APACHE = "Apache-2.0 (Cloud Carbon Footprint)"
_DATASHEET_LICENCE = "published specification (fact; no licence needed), cited"
_ASSUMED = "ASSUMPTION: 10 % of the datasheet maximum; NVIDIA publishes no idle figure"
_ASSUMED_LICENCE = "this project's assumption (same licence as the repository)"


def _datasheet(watts: str, document: str, year: str) -> Sourced:
    return Sourced(Decimal(watts), f"NVIDIA {document}, maximum power", year, _DATASHEET_LICENCE)


def _assumed_idle(max_w: str, year: str) -> Sourced:
    return Sourced(Decimal(max_w) / 10, _ASSUMED, year, _ASSUMED_LICENCE)


def _ccf(watts: str) -> Sourced:
    return Sourced(Decimal(watts), _CCF, _CCF_DATE, _APACHE)


GPU_POWER: dict[str, GpuPower] = {
    "H100": GpuPower(
        "H100 SXM",
        _assumed_idle("700", "2026-11-27"),
        _datasheet("700", "H100 Tensor Core GPU datasheet (H100 SXM)", "2023"),
    ),
    "H200": GpuPower(
        "H200 SXM",
        _assumed_idle("700", "2026-11-27"),
        _datasheet("700", "H200 Tensor Core GPU datasheet (H200 SXM)", "2024"),
    ),
    "B200": GpuPower(
        "B200",
        _assumed_idle("1000", "2026-11-27"),
        _datasheet("1000", "HGX B200 datasheet (per GPU)", "2024"),
    ),
    "A100": GpuPower(
        "A100 SXM",
        _ccf("46"),
        _datasheet("400", "A100 Tensor Core GPU datasheet (A100 SXM)", "2021"),
    ),
    "L40S": GpuPower(
        "L40S",
        _assumed_idle("350", "2026-11-27"),
        _datasheet("350", "L40S GPU datasheet", "2023"),
    ),
    "L4": GpuPower(
        "L4", _assumed_idle("72", "2026-11-27"), _datasheet("72", "L4 GPU datasheet", "2023")
    ),
    "A10G": GpuPower("A10G", _ccf("18"), _ccf("153")),
    "T4": GpuPower("T4", _ccf("8"), _ccf("71")),
    "V100": GpuPower("V100", _ccf("35"), _ccf("306")),
}


# --- PUE --------------------------------------------------------------------------------------

_CCF_PUE = (
    "Cloud Carbon Footprint, packages/{p}/src/domain/{P}FootprintEstimationConstants.ts PUE_{k} "
    "(github.com/cloud-carbon-footprint, commit 122a142; from the provider's published figures)"
)


def _pue(value: str, provider: str, kind: str = "AVG") -> Sourced:
    source = _CCF_PUE.format(p=provider.lower(), P=provider.capitalize(), k=kind)
    return Sourced(Decimal(value), source, _CCF_DATE, _APACHE)


# (provider, region) -> PUE; region "" is the provider's fleet average.
PUE: dict[tuple[str, str], Sourced] = {
    ("aws", ""): _pue("1.135", "aws"),
    ("azure", ""): _pue("1.185", "azure"),
    ("gcp", ""): _pue("1.1", "gcp"),
    **{
        ("gcp", region): _pue(value, "gcp", "TRAILING_TWELVE_MONTH")
        for region, value in {
            "us-east4": "1.08",
            "us-central1": "1.11",
            "us-central2": "1.11",
            "europe-west1": "1.09",
            "europe-west4": "1.07",
            "europe-north1": "1.09",
            "asia-east1": "1.12",
            "asia-southeast1": "1.13",
        }.items()
    },
}

# ProviderName as bills spell it -> the key above.
PROVIDER_KEYS = {
    "aws": "aws",
    "amazon web services": "aws",
    "microsoft": "azure",
    "azure": "azure",
    "microsoft azure": "azure",
    "google cloud": "gcp",
    "gcp": "gcp",
    "google cloud platform": "gcp",
    "google": "gcp",
}


def provider_key(provider_name: str) -> str:
    return PROVIDER_KEYS.get(provider_name.strip().lower(), "")


def pue_for(provider_name: str, region: str) -> Sourced | None:
    """The published PUE of a provider's region (or fleet); None for an unknown provider."""
    key = provider_key(provider_name)
    if not key:
        return None
    return PUE.get((key, region.strip().lower())) or PUE.get((key, ""))


# --- grid intensity ---------------------------------------------------------------------------

GRID_FILE = DATA / "grid_intensity.csv"


@dataclass(frozen=True, slots=True)
class GridDataset:
    source: str
    licence: str
    # country iso code -> (country name, g CO2e/kWh, year)
    rows: dict[str, tuple[str, Decimal, str]]


@cache
def grid_dataset() -> GridDataset:
    """data/grid_intensity.csv: `# source:` and `# licence:` header comments, then the rows."""
    source: list[str] = []
    licence = ""
    rows: dict[str, tuple[str, Decimal, str]] = {}
    with GRID_FILE.open(encoding="utf-8") as handle:
        lines = [line for line in handle]
    data = [line for line in lines if not line.startswith("#")]
    reading_source = False
    for line in lines:
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        if text.startswith("source:"):
            source.append(text.removeprefix("source:").strip())
            reading_source = True
        elif text.startswith("licence:"):
            licence = text.removeprefix("licence:").strip()
            reading_source = False
        elif reading_source:
            source.append(text)
    for row in csv.DictReader(data):
        rows[row["iso_code"]] = (row["country"], Decimal(row["g_co2e_per_kwh"]), row["year"])
    return GridDataset(source=" ".join(source), licence=licence, rows=rows)


def grid_intensity(country: str) -> Sourced | None:
    dataset = grid_dataset()
    row = dataset.rows.get(country.upper())
    if row is None:
        return None
    name, value, year = row
    return Sourced(value, f"{dataset.source} ({name}, {year})", year, dataset.licence)


# Cloud region -> ISO 3166 alpha-3 country of its data centres.
REGION_COUNTRY: dict[str, str] = {
    # AWS
    "us-east-1": "USA", "us-east-2": "USA", "us-west-1": "USA", "us-west-2": "USA",
    "ca-central-1": "CAN", "eu-west-1": "IRL", "eu-west-2": "GBR", "eu-west-3": "FRA",
    "eu-central-1": "DEU", "eu-north-1": "SWE", "eu-south-1": "ITA", "eu-south-2": "ESP",
    "ap-northeast-1": "JPN", "ap-northeast-2": "KOR", "ap-northeast-3": "JPN",
    "ap-southeast-1": "SGP", "ap-southeast-2": "AUS", "ap-south-1": "IND", "sa-east-1": "BRA",
    # Google Cloud
    "us-central1": "USA", "us-east1": "USA", "us-east4": "USA", "us-east5": "USA",
    "us-south1": "USA", "us-west1": "USA", "us-west2": "USA", "us-west3": "USA",
    "us-west4": "USA", "northamerica-northeast1": "CAN", "europe-west1": "BEL",
    "europe-west2": "GBR", "europe-west3": "DEU", "europe-west4": "NLD", "europe-west9": "FRA",
    "europe-north1": "FIN", "asia-east1": "TWN", "asia-northeast1": "JPN",
    "asia-southeast1": "SGP", "asia-south1": "IND", "australia-southeast1": "AUS",
    # Azure
    "eastus": "USA", "eastus2": "USA", "westus": "USA", "westus2": "USA", "westus3": "USA",
    "centralus": "USA", "southcentralus": "USA", "northcentralus": "USA",
    "northeurope": "IRL", "westeurope": "NLD", "uksouth": "GBR", "francecentral": "FRA",
    "germanywestcentral": "DEU", "swedencentral": "SWE", "japaneast": "JPN",
    "southeastasia": "SGP", "australiaeast": "AUS", "canadacentral": "CAN",
    # Oracle Cloud
    "us-ashburn-1": "USA", "us-phoenix-1": "USA", "us-chicago-1": "USA", "us-sanjose-1": "USA",
    "uk-london-1": "GBR", "eu-frankfurt-1": "DEU", "eu-amsterdam-1": "NLD",
    "ap-tokyo-1": "JPN", "ca-toronto-1": "CAN",
}  # fmt: skip


def region_country(region: str) -> str:
    """The country of a region: the table above, else a `us-` region (AWS, Google, Oracle and
    CoreWeave name every US region so: CoreWeave's US-EAST-04, with or without its zone
    letter) is in the USA; else "" (unknown: no grid intensity)."""
    key = region.strip().lower()
    if key in REGION_COUNTRY:
        return REGION_COUNTRY[key]
    return "USA" if key.startswith("us-") else ""
