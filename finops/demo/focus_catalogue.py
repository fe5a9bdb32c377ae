"""What the demo's bills are made of: the billing account of each provider, the commitments
(savings plan, committed use discount, reservation), the daily non-GPU charges, the FOCUS 1.2
columns, and how a value is written. generate_focus.py renders the rows from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from finops.demo.fleet import CLOUDS, INSTANCE_TYPES, Cloud

# A provider with no GPU cluster of ours: its small bill stays a FOCUS 1.2 file, so the demo
# keeps exercising the FOCUS path beside the native exports.
OCI = Cloud("Oracle", "oci", "", "UTC", "us-ashburn-1", "US East (Ashburn)")

FOCUS_COLUMNS = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingAccountType",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "CapacityReservationId",
    "CapacityReservationStatus",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountQuantity",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "CommitmentDiscountUnit",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingCurrency",
    "PricingCurrencyContractedUnitPrice",
    "PricingCurrencyEffectiveCost",
    "PricingCurrencyListUnitPrice",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceProviderName",
    "ServiceSubcategory",
    "SkuId",
    "SkuMeter",
    "SkuPriceDetails",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "SubAccountType",
    "Tags",
    "x_InstanceType",
)

Row = dict[str, str]
PLACES = Decimal("1e-10")
CENT = Decimal("0.01")


def money(value: Decimal) -> str:
    """A decimal string without exponent (str(Decimal) may print `0E-10`)."""
    return format(value, "f")


def timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class SubAccount:
    id: str
    name: str


@dataclass(frozen=True)
class Provider:
    cloud: Cloud
    billing_account_id: str
    billing_account_name: str
    billing_account_type: str
    sub_account_type: str
    issuer: str
    compute_service: str
    resource_type: str
    zone: str
    compute: SubAccount
    data: SubAccount


PROVIDERS: dict[str, Provider] = {
    "AWS": Provider(
        CLOUDS[0], "123456789012", "Acme AI (payer)", "Management Account", "Linked Account",
        "Amazon Web Services, Inc.", "Amazon Elastic Compute Cloud", "Instance", "us-east-1a",
        SubAccount("210987654321", "ml-training"), SubAccount("345678901234", "ml-data"),
    ),
    "GCP": Provider(
        CLOUDS[1], "01A2B3-C4D5E6-F7A8B9", "Acme AI billing", "Billing Account", "Project",
        "Google LLC", "Compute Engine", "Compute Instance", "us-central1-a",
        SubAccount("acme-ml-train", "acme-ml-train"),
        SubAccount("acme-speech-prod", "acme-speech-prod"),
    ),
    "Azure": Provider(
        CLOUDS[2], "/providers/Microsoft.Billing/billingAccounts/7c1e2d3f-acme:a1b2c3d4_2019-05-31",
        "Acme AI", "Billing Profile", "Subscription", "Microsoft Corporation",
        "Virtual Machines", "Virtual machine", "westus3-1",
        SubAccount("/subscriptions/5f1c2a3b-8d9e-4f00-a1b2-c3d4e5f6a7b8", "acme-gpu-prod"),
        SubAccount("/subscriptions/9e8d7c6b-5a4f-4e3d-b2c1-a0f9e8d7c6b5", "acme-data-prod"),
    ),
    "CoreWeave": Provider(
        CLOUDS[3], "acme-ai", "Acme AI", "Organization", "Namespace", "CoreWeave, Inc.",
        "CoreWeave Kubernetes Service", "Bare Metal Node", "US-EAST-04A",
        SubAccount("tenant-acme-training", "tenant-acme-training"),
        SubAccount("tenant-acme-data", "tenant-acme-data"),
    ),
    "Oracle": Provider(
        OCI, "ocid1.tenancy.oc1..aaaaaaaacme4demo7tenancy", "acme-ai", "Tenancy", "Compartment",
        "Oracle", "Object Storage", "Bucket", "US-ASHBURN-AD-1",
        SubAccount("ocid1.compartment.oc1..aaaaaaaacme4ml", "ml-research"),
        SubAccount("ocid1.compartment.oc1..aaaaaaaacme4data", "data-lake"),
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Commitment:
    key: str
    provider: str
    instance_type: str
    id: str
    name: str
    type: str
    category: str  # FOCUS CommitmentDiscountCategory: Spend or Usage
    # Fraction of the on-demand price paid for covered usage.
    rate_factor: Decimal

    def rate(self) -> Decimal:
        return (INSTANCE_TYPES[self.instance_type].list_price * self.rate_factor).quantize(
            Decimal("0.0001")
        )


COMMITMENTS: dict[str, Commitment] = {
    "savings_plan": Commitment(
        "savings_plan", "AWS", "p5.48xlarge",
        "arn:aws:savingsplans::123456789012:savingsplan/3f0c9a6e-2b7d-4c1e-9a8f-5d6e7f8a9b0c",
        "EC2 Instance Savings Plan p5 us-east-1 3yr", "Savings Plan", "Spend", Decimal("0.55"),
    ),
    "cud": Commitment(
        "cud", "GCP", "a3-highgpu-8g",
        "projects/acme-ml-train/regions/us-central1/commitments/a3-h100-1y",
        "a3-h100-1y", "Committed Use Discount", "Usage", Decimal("0.63"),
    ),
    "reservation": Commitment(
        "reservation", "Azure", "Standard_ND96isr_H100_v5",
        "/providers/Microsoft.Capacity/reservationOrders/0c1d2e3f-4a5b-6c7d-8e9f-a0b1c2d3e4f5"
        "/reservations/1a2b3c4d-5e6f-7a8b-9c0d-e1f2a3b4c5d6",
        "ND96isr_H100_v5 westus3 1yr", "Reservation", "Usage", Decimal("0.62"),
    ),
}  # fmt: skip

# CoreWeave bills its contract rate: list price x this factor.
COREWEAVE_CONTRACT_FACTOR = Decimal("0.80")


@dataclass(frozen=True)
class DailyCharge:
    """A non-GPU usage charge billed per day (storage, egress)."""

    provider: str
    data_account: bool
    service_name: str
    service_category: str
    service_subcategory: str
    resource_id: str
    resource_name: str
    resource_type: str
    tags: dict[str, str]
    unit: str
    unit_price: Decimal
    # Quantity per day at full scale (GB-Mo for storage, GB for egress).
    daily_quantity: Decimal
    growth: Decimal = Decimal(0)


DAILY_CHARGES: tuple[DailyCharge, ...] = (
    DailyCharge(
        "AWS", True, "Amazon Simple Storage Service", "Storage", "Object Storage",
        "arn:aws:s3:::acme-vision-datasets", "acme-vision-datasets", "Bucket",
        {"team": "vision"}, "GB-Mo", Decimal("0.021"), Decimal("12000"), Decimal("0.004"),
    ),
    DailyCharge(
        "AWS", True, "Amazon FSx", "Storage", "File Storage",
        "arn:aws:fsx:us-east-1:345678901234:file-system/fs-0a1b2c3d4e5f60718",
        "llama-lustre", "File System", {"team": "language", "project": "llama"}, "GB-Mo",
        Decimal("0.145"), Decimal("7800"),
    ),
    DailyCharge(
        "AWS", True, "Amazon Simple Storage Service", "Storage", "Object Storage",
        "arn:aws:s3:::acme-shared-scratch", "acme-shared-scratch", "Bucket", {}, "GB-Mo",
        Decimal("0.023"), Decimal("5000"), Decimal("0.01"),
    ),
    DailyCharge(
        "AWS", False, "AWS Data Transfer", "Networking", "Network Connectivity",
        "", "", "", {}, "GB", Decimal("0.05"), Decimal("1400"),
    ),
    DailyCharge(
        "GCP", True, "Cloud Storage", "Storage", "Object Storage",
        "//storage.googleapis.com/projects/_/buckets/acme-speech-audio", "acme-speech-audio",
        "Bucket", {"team": "speech"}, "GiBy.mo", Decimal("0.020"), Decimal("6500"),
        Decimal("0.006"),
    ),
    # Untagged, but in the speech team's project: a sub-account rule maps it.
    DailyCharge(
        "GCP", True, "Filestore", "Storage", "File Storage",
        "//file.googleapis.com/projects/acme-speech-prod/locations/us-central1-a/instances/asr-fs",
        "asr-fs", "Instance", {}, "GiBy.mo", Decimal("0.16"), Decimal("2000"),
    ),
    DailyCharge(
        "GCP", False, "Networking", "Networking", "Network Connectivity", "", "", "", {},
        "GiBy", Decimal("0.085"), Decimal("950"),
    ),
    # Tagged with a project, not a team: a tag mapping rule maps it.
    DailyCharge(
        "Azure", True, "Storage", "Storage", "Object Storage",
        "/subscriptions/9e8d7c6b-5a4f-4e3d-b2c1-a0f9e8d7c6b5/resourcegroups/rg-data/providers"
        "/microsoft.storage/storageaccounts/acmerankerdata",
        "acmerankerdata", "Storage account", {"project": "ranker"}, "GB/Month",
        Decimal("0.0184"), Decimal("5200"), Decimal("0.003"),
    ),
    DailyCharge(
        "Azure", False, "Storage", "Storage", "Block Storage",
        "/subscriptions/5f1c2a3b-8d9e-4f00-a1b2-c3d4e5f6a7b8/resourcegroups/rg-gpu/providers"
        "/microsoft.compute/disks/gpu-scratch-pool",
        "gpu-scratch-pool", "Disk", {}, "GB/Month", Decimal("0.12"), Decimal("1100"),
    ),
    DailyCharge(
        "Azure", False, "Bandwidth", "Networking", "Network Connectivity", "", "", "", {}, "GB",
        Decimal("0.087"), Decimal("600"),
    ),
    DailyCharge(
        "CoreWeave", True, "Distributed File Storage", "Storage", "File Storage",
        "coreweave:us-east-04:pvc/shared-fs-training", "shared-fs-training", "Volume",
        {"team": "language"}, "GB-Mo", Decimal("0.07"), Decimal("16000"),
    ),
    DailyCharge(
        "CoreWeave", True, "AI Object Storage", "Storage", "Object Storage",
        "coreweave:us-east-04:bucket/acme-checkpoints", "acme-checkpoints", "Bucket", {},
        "GB-Mo", Decimal("0.03"), Decimal("9000"),
    ),
    DailyCharge(
        "Oracle", True, "Object Storage", "Storage", "Object Storage",
        "ocid1.bucket.oc1.iad.aaaaaaaacme4vision", "vision-archive", "Bucket",
        {"team": "vision"}, "GB-Mo", Decimal("0.0255"), Decimal("8000"), Decimal("0.002"),
    ),
    DailyCharge(
        "Oracle", True, "Block Storage", "Storage", "Block Storage",
        "ocid1.volume.oc1.iad.aaaaaaaacme4scratch", "research-scratch", "Volume", {}, "GB-Mo",
        Decimal("0.0255"), Decimal("3000"),
    ),
    DailyCharge(
        "Oracle", False, "Networking", "Networking", "Network Connectivity", "", "", "",
        {"team": "language"}, "GB", Decimal("0.0085"), Decimal("2500"),
    ),
)  # fmt: skip
