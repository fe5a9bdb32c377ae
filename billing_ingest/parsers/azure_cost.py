"""Azure Cost Management "cost details" exports (actual and amortised; EA and MCA), and the
FocusCost export, which is handed to the FOCUS parser.

Detection (the parser gets only the path): a header holding BilledCost, EffectiveCost and
ChargePeriodStart is Azure's FOCUS export and goes to billing_ingest.parsers.focus unchanged;
anything else is read as a cost-details export. Column names are matched ignoring case, because
MCA exports write camelCase (costInBillingCurrency) where EA writes PascalCase (Cost).

Actual vs amortised: both files have one cost column (Cost / CostInBillingCurrency) and nothing in
them says reliably which kind they are, so every row gets BilledCost = EffectiveCost = that cost
and the import total is exactly the column's sum. In an amortised export that cost *is* the
amortised cost (reservation usage carries its share, UnusedReservation rows carry the waste), so
attribution should be fed the amortised export; an actual-cost export still imports, with
reservation purchases as Purchase rows at their cash cost (they cannot be amortised without the
amortised file) and reservation-covered usage at 0.

Legacy usage exports (the first Cost Management exports: UsageDateTime, PreTaxCost,
SubscriptionGuid, UsageQuantity, InstanceId, in PascalCase or camelCase headers) have no billing
period column: each row's billing period is then its usage date's month, and the import summary
says how many rows were read so.

Rows are daily: the charge period is [Date 00:00, next day 00:00) UTC. EA exports write dates as
MM/DD/YYYY (Azure's US format, never DD/MM), MCA and newer exports ISO 8601; each cell is read by
its own shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from billing_ingest.parsers import LineItemChunks, register_billing_parser
from billing_ingest.parsers.azure_values import (
    additional_info,
    arm_region,
    azure_day,
    azure_tags,
    midnight_utc,
    vm_resource_name,
    vm_size,
)
from billing_ingest.parsers.bounds import csv_reader
from billing_ingest.parsers.checks import check_record_batch, check_unique_columns
from billing_ingest.parsers.focus import FocusRowBuilder, read_focus_file
from billing_ingest.parsers.rows import LineItemRow, row_text
from billing_ingest.parsers.values import (
    CHUNK_ROWS,
    GZIP_MAGIC,
    PARQUET_MAGIC,
    BadValue,
    built_chunks,
    cell_text,
    column_max_length,
    csv_header,
    csv_rows,
    is_null,
    open_text,
    parse_currency,
    parse_money,
    parse_quantity,
    read_magic,
)
from finops.core.errors import ImportFormatError
from finops.core.wording import plural

PROVIDER_NAME = "Microsoft"

# A FOCUS header (Azure's FocusCost export) has all of these; cost details exports have none.
_FOCUS_MARKERS = ("billedcost", "effectivecost", "chargeperiodstart")

# Logical column -> header names in order of preference (compared lower-cased).
_COLUMNS: dict[str, tuple[str, ...]] = {
    "date": ("Date", "UsageDate", "UsageDateTime"),
    "cost": ("CostInBillingCurrency", "Cost", "PreTaxCost"),
    "currency": ("BillingCurrency", "BillingCurrencyCode", "Currency"),
    "billing_period_start": ("BillingPeriodStartDate",),
    "billing_period_end": ("BillingPeriodEndDate",),
    "billing_account_id": ("BillingAccountId",),
    "billing_account_name": ("BillingAccountName",),
    "subscription_id": ("SubscriptionId", "SubscriptionGuid"),
    "subscription_name": ("SubscriptionName",),
    "meter_category": ("MeterCategory",),
    "meter_subcategory": ("MeterSubCategory",),
    "meter_name": ("MeterName",),
    "consumed_service": ("ConsumedService",),
    "meter_id": ("MeterId",),
    "part_number": ("PartNumber",),
    "resource_id": ("ResourceId", "InstanceName", "InstanceId"),
    "resource_name": ("ResourceName",),
    "location": ("ResourceLocation", "Location"),
    "charge_type": ("ChargeType",),
    "pricing_model": ("PricingModel",),
    "reservation_id": ("ReservationId",),
    "benefit_id": ("BenefitId",),
    "tags": ("Tags",),
    "additional_info": ("AdditionalInfo",),
    "quantity": ("Quantity", "UsageQuantity"),
    "unit": ("UnitOfMeasure",),
    "payg_cost": ("PaygCostInBillingCurrency",),
}
# Without BillingPeriodStartDate (legacy usage exports) the period follows the usage date.
_REQUIRED = ("date", "cost", "currency")
# The usage date columns: a header with one of them is a cost details export, never FOCUS.
_DATE_NAMES = frozenset(name.lower() for name in _COLUMNS["date"])
# Text fields with a length limit -> the logical column an overlong value comes from.
_FIELD_SOURCE = {
    "billing_account_id": "billing_account_id",
    "sub_account_id": "subscription_id",
    "billing_account_name": "billing_account_name",
    "sub_account_name": "subscription_name",
    "service_name": "meter_category",
    "sku_id": "meter_id",
    "region_id": "location",
    "resource_id": "resource_id",
    "resource_name": "resource_name",
    "commitment_discount_id": "reservation_id",
    "consumed_unit": "unit",
    "x_instance_type": "additional_info",
}

# Azure ChargeType -> FOCUS ChargeCategory. A refund is a negative purchase (FOCUS ChargeClass
# Correction); unused commitment is usage of the commitment (CommitmentDiscountStatus Unused).
_CHARGE_CATEGORY = {
    "usage": "Usage",
    "purchase": "Purchase",
    "refund": "Purchase",
    "unusedreservation": "Usage",
    "unusedsavingsplan": "Usage",
    "roundingadjustment": "Adjustment",
    "adjustment": "Adjustment",
    "tax": "Tax",
    "credit": "Credit",
}
_PRICING_CATEGORY = {
    "ondemand": "Standard",
    "reservation": "Committed",
    "savingsplan": "Committed",
    "spot": "Dynamic",
}
_COMMITMENT_TYPE = {"reservation": "Reservation", "savingsplan": "Savings Plan"}
_UNUSED_TYPE = {"unusedreservation": "Reservation", "unusedsavingsplan": "Savings Plan"}


def _is_focus(header: Sequence[str]) -> bool:
    # Any FOCUS cost or charge period column and no cost details Date: a FocusCost export, even
    # one missing a column (the FOCUS parser then names it, rather than asking for Date).
    names = {name.strip().lower() for name in header}
    return any(marker in names for marker in _FOCUS_MARKERS) and not names & _DATE_NAMES


class _AzureRow:
    """Maps one cost-details row (cells in header order) to CostLineItem fields."""

    def __init__(self, header: Sequence[str], *, file_label: str) -> None:
        self.file_label = file_label
        self.width = len(header)
        positions: dict[str, int] = {}
        for index, name in enumerate(header):
            positions.setdefault(name.strip().lower(), index)
        # logical name -> (header name as written, position)
        self.columns: dict[str, tuple[str, int]] = {}
        for key, names in _COLUMNS.items():
            for name in names:
                position = positions.get(name.lower())
                if position is not None:
                    self.columns[key] = (header[position].strip(), position)
                    break
        missing = [key for key in _REQUIRED if key not in self.columns]
        if missing:
            wanted = "; ".join(" or ".join(_COLUMNS[key]) for key in missing)
            raise ImportFormatError(
                f"missing required Azure cost details {plural('column', len(missing))}: {wanted}",
                file=file_label,
                column=_COLUMNS[missing[0]][0],
            )
        used = [position for _, position in self.columns.values()]
        check_unique_columns(header, used, file_label=file_label)
        self.limits = {field: column_max_length(field) for field in _FIELD_SOURCE}

    def _raw(self, cells: Sequence[object], key: str) -> object:
        hit = self.columns.get(key)
        return None if hit is None else cells[hit[1]]

    def _str(self, cells: Sequence[object], key: str) -> str:
        return cell_text(self._raw(cells, key))

    def _error(self, message: str, row: int, key: str) -> ImportFormatError:
        column = self.columns[key][0] if key in self.columns else _COLUMNS[key][0]
        return ImportFormatError(message, file=self.file_label, row=row, column=column)

    def _convert(self, cells: Sequence[object], key: str, row: int, convert: Any) -> Any:
        try:
            return convert(self._raw(cells, key))
        except BadValue as exc:
            raise self._error(str(exc), row, key) from None

    def _period(
        self, cells: Sequence[object], row: int, day: date
    ) -> tuple[date, datetime | None, str | None]:
        """The billing period's first day and (exclusive) end, and a note when the period was
        taken from the usage date."""
        note = None
        if "billing_period_start" not in self.columns:
            # A legacy usage export: no billing period column at all.
            period_day = day.replace(day=1)
            note = (
                "no BillingPeriodStartDate column (legacy usage export): billing period taken "
                "from the month of the usage date"
            )
        elif is_null(self._raw(cells, "billing_period_start")):
            # Some exports leave it empty (seen on real MCA files); the invoice a daily row
            # lands on is its usage month's, and the import summary says how many were read so.
            period_day = day.replace(day=1)
            column = self.columns["billing_period_start"][0]
            note = f"{column} empty: billing period taken from the month of the usage date"
        else:
            period_day = self._convert(cells, "billing_period_start", row, azure_day)
        period_end = None
        if not is_null(self._raw(cells, "billing_period_end")):
            # BillingPeriodEndDate is the period's last day; FOCUS ends are exclusive.
            period_end = midnight_utc(self._convert(cells, "billing_period_end", row, azure_day))
            period_end += timedelta(days=1)
        return period_day, period_end, note

    def _categories(self, cells: Sequence[object], row: int) -> tuple[str, str, str, str]:
        """(charge type, FOCUS ChargeCategory, pricing model, FOCUS PricingCategory); the
        types lowercased as the lookups want them."""
        charge_type = self._str(cells, "charge_type").lower()
        category = _CHARGE_CATEGORY.get(charge_type or "usage")
        if category is None:
            raise self._error(
                f"unknown ChargeType {self._str(cells, 'charge_type')!r}; expected one of "
                "Usage, Purchase, Refund, UnusedReservation, UnusedSavingsPlan, "
                "RoundingAdjustment, Tax",
                row,
                "charge_type",
            )
        pricing_model = self._str(cells, "pricing_model").lower()
        pricing = _PRICING_CATEGORY.get(pricing_model, "Other" if pricing_model else "")
        if category == "Purchase" or (not pricing and category == "Usage"):
            # FOCUS prices a commitment purchase Standard (the spec's purchase examples); older
            # EA exports have no PricingModel at all, which means on-demand.
            pricing = "Standard"
        return charge_type, category, pricing_model, pricing

    def build(self, cells: Sequence[object], row: int) -> LineItemRow:
        if len(cells) != self.width:
            raise ImportFormatError(
                f"has {len(cells)} values but the header has {self.width} columns",
                file=self.file_label,
                row=row,
            )
        day = self._convert(cells, "date", row, azure_day)
        period_day, period_end, note = self._period(cells, row, day)
        cost = self._convert(cells, "cost", row, parse_money)
        if cost is None:
            raise self._error("is empty but a cost is required", row, "cost")
        currency = self._convert(cells, "currency", row, parse_currency)
        charge_type, category, pricing_model, pricing = self._categories(cells, row)

        commitment_id = self._str(cells, "reservation_id") or self._str(cells, "benefit_id")
        commitment_type = _UNUSED_TYPE.get(charge_type) or _COMMITMENT_TYPE.get(pricing_model, "")
        if charge_type in _UNUSED_TYPE:
            status = "Unused"
        elif category == "Usage" and pricing == "Committed":
            status = "Used"
        else:
            status = ""

        quantity = None
        unit = ""
        if category == "Usage" and status != "Unused":
            quantity = self._convert(cells, "quantity", row, parse_quantity)
            unit = self._str(cells, "unit")

        resource_id = self._str(cells, "resource_id")
        meter_category = self._str(cells, "meter_category")
        info = additional_info(self._raw(cells, "additional_info"))
        item: LineItemRow = {
            "billing_period": date(period_day.year, period_day.month, 1),
            "billing_period_start": midnight_utc(period_day),
            "billing_period_end": period_end,
            "provider_name": PROVIDER_NAME,
            "billing_account_id": self._str(cells, "billing_account_id")
            or self._str(cells, "billing_account_name"),
            "sub_account_id": self._str(cells, "subscription_id"),
            "billing_account_name": self._str(cells, "billing_account_name"),
            "sub_account_name": self._str(cells, "subscription_name"),
            "charge_period_start": midnight_utc(day),
            "charge_period_end": midnight_utc(day + timedelta(days=1)),
            "charge_category": category,
            "pricing_category": pricing,
            "service_category": "",
            "service_name": meter_category or self._str(cells, "consumed_service"),
            "sku_id": self._str(cells, "meter_id") or self._str(cells, "part_number"),
            "region_id": arm_region(self._str(cells, "location")),
            "resource_id": resource_id,
            "resource_name": vm_resource_name(self._str(cells, "resource_name"), resource_id, info),
            "resource_type": "",
            "commitment_discount_id": commitment_id,
            "commitment_discount_status": status,
            "commitment_discount_type": commitment_type,
            "consumed_quantity": quantity,
            "consumed_unit": unit,
            "list_cost": self._convert(cells, "payg_cost", row, parse_money),
            "contracted_cost": None,
            "billed_cost": cost,
            "effective_cost": cost,
            "billing_currency": currency,
            "tags": self._convert(cells, "tags", row, azure_tags),
            "x_instance_type": vm_size(
                info,
                meter_category,
                self._str(cells, "meter_subcategory"),
                self._str(cells, "meter_name"),
            ),
            "x_gpu_count": None,
            "x_gpu_model": "",
        }
        for field, limit in self.limits.items():
            if len(row_text(item, field)) > limit:
                raise self._error(
                    f"value is longer than {limit} characters ({field})", row, _FIELD_SOURCE[field]
                )
        if note is not None:
            item["_import_note"] = note
        return item


# --------------------------------------------------------------------------- readers


def _no_data(file_label: str) -> ImportFormatError:
    return ImportFormatError("file has a header but no data rows", file=file_label)


def _csv_header(path: Path, *, file_label: str, compressed: bool) -> list[str]:
    with open_text(path, compressed=compressed, file_label=file_label) as handle:
        return csv_header(csv_reader(handle, file_label=file_label), file_label=file_label)


def _parse_csv(
    path: Path, header: list[str], *, file_label: str, compressed: bool, chunk_size: int
) -> LineItemChunks:
    try:
        mapper = _AzureRow(header, file_label=file_label)
    except ImportFormatError as exc:
        raise exc.with_row(1) from None  # the header is row 1 of a CSV
    with open_text(path, compressed=compressed, file_label=file_label) as handle:
        reader = csv_reader(handle, file_label=file_label)
        next(reader)  # the header, already read
        rows: Iterator[tuple[int, Sequence[object]]] = csv_rows(
            reader, file_label=file_label, header=header
        )
        yield from built_chunks(
            rows, mapper.build, chunk_size=chunk_size, empty_error=_no_data(mapper.file_label)
        )


def _parquet_header(path: Path, *, file_label: str) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return list(pq.ParquetFile(path).schema_arrow.names)
    except (pa.ArrowException, OSError) as exc:
        raise ImportFormatError(f"cannot read Parquet ({exc})", file=file_label) from None


def _parquet_rows(
    path: Path, *, file_label: str, chunk_size: int
) -> Iterator[tuple[int, Sequence[object]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    number = 1
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=chunk_size):
            check_record_batch(batch, first_row=number, file_label=file_label)
            columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            for index in range(batch.num_rows):
                yield number, [column[index] for column in columns]
                number += 1
    except pa.ArrowException as exc:
        raise ImportFormatError(
            f"cannot read Parquet ({exc})", file=file_label, row=number
        ) from None


def _parse_parquet(
    path: Path, header: list[str], *, file_label: str, chunk_size: int
) -> LineItemChunks:
    mapper = _AzureRow(header, file_label=file_label)
    rows = _parquet_rows(path, file_label=file_label, chunk_size=chunk_size)
    yield from built_chunks(
        rows, mapper.build, chunk_size=chunk_size, empty_error=_no_data(mapper.file_label)
    )


def _parse_focus_cost(path: Path, *, file_label: str, chunk_size: int) -> LineItemChunks:
    """Azure's FocusCost export, read as FOCUS; a row of another provider fails the import
    (an AWS or GCP FOCUS file given as --format azure belongs under --format focus)."""
    return read_focus_file(
        path,
        file_label=file_label,
        chunk_size=chunk_size,
        make_builder=lambda header: FocusRowBuilder(
            header, file_label=file_label, provider=PROVIDER_NAME
        ),
    )


@register_billing_parser("azure")
def parse_azure_cost(
    path: Path, *, file_label: str, chunk_size: int = CHUNK_ROWS
) -> LineItemChunks:
    """Chunks of CostLineItem field dicts from an Azure cost details export (CSV, CSV.gz or
    Parquet), or from Azure's FocusCost export through the FOCUS parser."""
    if read_magic(path) == PARQUET_MAGIC or path.suffix.lower() == ".parquet":
        header = _parquet_header(path, file_label=file_label)
        if _is_focus(header):
            return _parse_focus_cost(path, file_label=file_label, chunk_size=chunk_size)
        return _parse_parquet(path, header, file_label=file_label, chunk_size=chunk_size)
    compressed = read_magic(path)[:2] == GZIP_MAGIC or path.suffix.lower() == ".gz"
    header = _csv_header(path, file_label=file_label, compressed=compressed)
    if _is_focus(header):
        return _parse_focus_cost(path, file_label=file_label, chunk_size=chunk_size)
    return _parse_csv(
        path, header, file_label=file_label, compressed=compressed, chunk_size=chunk_size
    )
