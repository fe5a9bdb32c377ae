"""AWS Cost and Usage Reports, CUR 2.0 (Data Exports) and legacy CUR, mapped onto FOCUS columns.

The package: columns.py (both spellings of every column, categories), row.py (one row at a time,
CSV or Parquet), table.py (a chunk of CSV columns at once, pyarrow), and here the readers and the
registered parser `aws-cur`.

Flavour comes from the header: legacy CUR CSV names columns ``lineItem/UsageStartDate``; CUR 2.0
(and legacy CUR delivered as Parquet / Athena) names them ``line_item_usage_start_date``. Columns
are matched on a "squashed" name (lowercase, letters and digits only), so both spellings and the
two ARN spellings AWS uses (``savingsPlan/SavingsPlanARN``, ``savingsPlan/SavingsPlanArn``,
``savings_plan_savings_plan_a_r_n``) all land on the same column.

Files are CSV (plain, gzip or a one-member zip, recognised by magic bytes) or Parquet, read in
chunks: CSV row by row through the csv module, Parquet one record batch at a time, only the
columns used.

Mapping decisions (beyond the obvious one-to-one columns):
- EffectiveCost is AWS's amortised cost by line item type (see ``CurRowBuilder._effective_cost``).
- SavingsPlanNegation is ChargeCategory Usage (PricingCategory Committed, status Used): it
  cancels the on-demand cost of covered usage on the invoice, so in FOCUS terms it is part of that
  usage (covered usage plus its negation bills 0, as FOCUS wants for commitment-covered usage). It
  is not a Credit: nothing is refunded; and its EffectiveCost is 0.
- RIFee and SavingsPlanRecurringFee are Purchases whose EffectiveCost is the unused commitment;
  they carry CommitmentDiscountStatus "Unused" so attribution can tell idle commitment apart.
- Tags: legacy ``resourceTags/user:team`` gives {"user:team": v, "team": v}; CUR 2.0's
  ``resource_tags`` map key ``user_team`` (and Athena-style ``resource_tags_user_team`` columns)
  gives {"user_team": v, "team": v}. The original key is always kept; the key without the
  ``user:``/``user_`` prefix is added (never overwriting) so a plain ``team`` tag rule matches
  every flavour. AWS-generated tags (``aws:createdBy``) are kept as they are. Empty values are
  dropped: legacy CSV cannot tell "no tag" from "empty tag".
- Missing amortisation columns are an error only when a row needs them; an empty cell is 0
  (AWS leaves non-applicable cells blank).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from billing_ingest.parsers import LineItemChunks, register_billing_parser
from billing_ingest.parsers.aws_cur.row import CurRowBuilder
from billing_ingest.parsers.aws_cur.table import CurTableBuilder
from billing_ingest.parsers.bounds import bounded_binary, csv_reader
from billing_ingest.parsers.columnar import (
    arrow_csv_tables,
    parquet_chunks,
)
from billing_ingest.parsers.lines import CappedText
from billing_ingest.parsers.values import (
    CHUNK_ROWS,
    GZIP_MAGIC,
    HEADER_READ_ERRORS,
    PARQUET_MAGIC,
    built_chunks,
    csv_header,
    csv_rows,
    open_text,
    read_magic,
    skip_rows,
)
from finops.core.errors import ImportFormatError

_ZIP_MAGIC = b"PK\x03\x04"


def _open_zip_member(path: Path, *, file_label: str) -> CappedText:
    """Legacy CUR can be delivered zipped: one CSV inside, streamed (never extracted whole)."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ImportFormatError(f"cannot read zip ({exc})", file=file_label) from None
    members = [info for info in archive.infolist() if not info.is_dir()]
    if len(members) != 1:
        archive.close()
        raise ImportFormatError(
            f"zip holds {len(members)} files; expected one CUR CSV", file=file_label
        )
    binary = bounded_binary(
        archive.open(members[0]), packed_bytes=members[0].compress_size, file_label=file_label
    )
    text = io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape", newline="")
    return CappedText(text, file_label=file_label)


def _parse_csv(path: Path, *, file_label: str, kind: str, chunk_size: int) -> LineItemChunks:
    if kind == "zip":
        handle = _open_zip_member(path, file_label=file_label)
    else:
        handle = open_text(path, compressed=kind == "gzip", file_label=file_label)
    with handle:
        reader = csv_reader(handle, file_label=file_label)
        # A zip member's read errors are OSErrors (zipfile.BadZipFile, a bad CRC).
        header = csv_header(reader, file_label=file_label, errors=(OSError, *HEADER_READ_ERRORS))
        try:
            builder = CurRowBuilder(header, file_label=file_label)
        except ImportFormatError as exc:
            raise exc.with_row(1) from None  # the header is row 1 of a CSV
        delivered = 0
        if kind != "zip":
            build = CurTableBuilder(builder).build
            delivered, finished = yield from arrow_csv_tables(
                path,
                header,
                build,
                compressed=kind == "gzip",
                chunk_size=chunk_size,
                file_label=file_label,
            )
            if finished and delivered:
                return
        rows = skip_rows(csv_rows(reader, file_label=file_label, header=header), delivered)
        seen = delivered > 0
        for chunk in built_chunks(rows, builder.build, chunk_size=chunk_size):
            seen = True
            yield chunk
        if not seen:
            raise ImportFormatError("file has a header but no data rows", file=file_label)


@register_billing_parser("aws-cur", database_free=True)
def parse_aws_cur(path: Path, *, file_label: str, chunk_size: int = CHUNK_ROWS) -> LineItemChunks:
    """Chunks of CostLineItem field dicts from an AWS CUR 2.0 or legacy CUR file."""
    magic = read_magic(path)
    if magic == PARQUET_MAGIC or path.suffix.lower() == ".parquet":
        return parquet_chunks(
            path,
            file_label=file_label,
            chunk_size=chunk_size,
            make_builder=lambda header: CurRowBuilder(header, file_label=file_label),
        )
    if magic == _ZIP_MAGIC:
        kind = "zip"
    elif magic[:2] == GZIP_MAGIC:
        kind = "gzip"
    else:
        kind = "plain"
    return _parse_csv(path, file_label=file_label, kind=kind, chunk_size=chunk_size)
