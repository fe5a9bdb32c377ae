"""The row contracts between the parsers and the loaders, as TypedDicts, so that mypy checks
the field names a parser writes and the types it gives them.

- LineItemRow: billing parsers -> services/billing.py. One line item as CostLineItem field
  values, already normalised (Decimal money, UTC-aware datetimes, the billing period as the
  first day of its month); batch and source are the loader's to set.
- JobRow: job parsers (Slurm, Kubernetes pods, OpenCost) -> services/jobs.py.

Every key is optional to the type checker (a parser may leave a column to the model's default);
the database constraints and the parsers' own checks say which values must be there.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final, TypedDict, cast

# A row dict may carry, under this key, a note for the import summary about how the row was read
# (e.g. a value inferred because the export left it empty). The loader pops it before storing
# the row and counts each note's rows on the batch (ImportBatch.notes).
ROW_NOTE: Final = "_import_note"
# A job row may carry this key (True) when its end is the time a snapshot saw the job finished
# without saying when (an evicted pod that kept no times): the loader pops it and keeps the end
# already stored for the same job (same job_id_raw), so later snapshots of the same pod do not
# move its end on.
END_FROM_SNAPSHOT: Final = "_end_from_snapshot"


class LineItemRow(TypedDict, total=False):
    # Set by the loader, never by a parser.
    batch_id: int
    source: str
    # CostLineItem fields.
    billing_period: date
    billing_period_start: datetime
    billing_period_end: datetime | None
    provider_name: str
    billing_account_id: str
    sub_account_id: str
    billing_account_name: str
    sub_account_name: str
    charge_period_start: datetime
    charge_period_end: datetime
    charge_category: str
    pricing_category: str
    service_category: str
    service_name: str
    sku_id: str
    region_id: str
    resource_id: str
    resource_name: str
    resource_type: str
    commitment_discount_id: str
    commitment_discount_status: str
    commitment_discount_type: str
    consumed_quantity: Decimal | None
    consumed_unit: str
    list_cost: Decimal | None
    contracted_cost: Decimal | None
    billed_cost: Decimal
    effective_cost: Decimal
    billing_currency: str
    tags: dict[str, Any]
    x_credits: list[dict[str, Any]]
    x_instance_type: str
    x_gpu_count: int | None
    x_gpu_model: str
    # How the row was read where the file left something out (ROW_NOTE); the loader
    # counts and removes it before the row is stored.
    _import_note: str


class JobRow(TypedDict, total=False):
    """One JobRecord as the job parsers (Slurm, Kubernetes pods, OpenCost) give it to the loader
    (services/jobs.py), which adds batch and cluster."""

    job_id: str
    # Set by the loader: the attempt of a requeued Slurm job (1 for everything else).
    attempt: int
    job_id_raw: str
    name: str
    account: str
    user: str
    partition: str
    state: str
    start: datetime | None
    end: datetime | None
    gpus: Decimal
    gpu_numerator: int | None
    gpu_denominator: int | None
    nodes: list[str]
    run_id: str
    wckey: str
    comment: str
    namespace: str
    labels: dict[str, str]
    endpoint: str
    # A long-running server or runner, not a training run (Slurm `--comment service=true`, pod
    # label `finops.io/service: "true"`, an endpoint's pods): no checkpoint advice, no rework,
    # restart or abandoned waste (finops.waste).
    service: bool
    # END_FROM_SNAPSHOT: popped by the loader.
    _end_from_snapshot: bool


def row_text(row: LineItemRow | JobRow, field: str) -> str:
    """A text field named at run time (the parsers' length checks loop over field names)."""
    return cast(Mapping[str, str], row)[field]
