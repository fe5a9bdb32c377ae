"""Check that the parts of one export delivery belong together, before they are imported.

A delivery (one month's manifest or export run) is imported as ONE batch whose parts are loaded
by one task each (billing_ingest.services.billing): restatement replaces rows by (source,
billing period), so the parts must not replace each other, and a failure in any part must leave
the month as it was. Parts are therefore never joined into one file; this module only refuses a
delivery whose parts cannot be one table: Parquet mixed with CSV, a CSV part whose header
differs from the first part's, or a Parquet part whose schema differs. Only headers and Parquet
footers are read, so the check costs nothing next to the import.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import IO, cast

from billing_ingest.sources import SourceFetchError

_GZIP = b"\x1f\x8b"
_PARQUET = b"PAR1"
_BOM = b"\xef\xbb\xbf"


class PartsMismatchError(SourceFetchError):
    """Parts of one delivery do not share a format, header or schema, or one is unreadable."""


def _kind(path: Path) -> str:
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic == _PARQUET:
        return "parquet"
    if magic[:2] == _GZIP:
        return "gzip"
    return "csv"


def _csv_header(path: Path, kind: str, label: str) -> bytes:
    opened = gzip.GzipFile(path, "rb") if kind == "gzip" else path.open("rb")
    try:
        with cast(IO[bytes], opened) as handle:
            line = handle.readline()
    except (EOFError, OSError, zlib.error) as exc:
        raise PartsMismatchError(f"{label}: gzip data is corrupt ({exc})") from None
    return line.removeprefix(_BOM).rstrip(b"\r\n")


def _parquet_schema(path: Path, label: str) -> object:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).schema_arrow
    except pa.ArrowException as exc:
        raise PartsMismatchError(f"{label}: cannot read Parquet ({exc})") from None


def parts_check(parts: list[Path], *, labels: list[str] | None = None) -> None:
    """Raise PartsMismatchError unless every part has the first part's format and header (CSV,
    plain or gzip) or schema (Parquet). ``labels`` name the parts in errors (remote keys)."""
    if not parts:
        raise SourceFetchError("delivery has no data files")
    names = labels or [str(part) for part in parts]
    kinds = [_kind(part) for part in parts]
    if "parquet" in kinds and len(set(kinds)) > 1:
        raise PartsMismatchError(f"parts mix Parquet and CSV: {', '.join(names)}")
    if len(parts) == 1:
        return
    if kinds[0] == "parquet":
        first_schema = _parquet_schema(parts[0], names[0])
        for part, label in zip(parts[1:], names[1:], strict=True):
            schema = _parquet_schema(part, label)
            if not schema.equals(first_schema):  # type: ignore[attr-defined]
                raise PartsMismatchError(
                    f"{label}: Parquet schema differs from the first part's ({names[0]})"
                )
        return
    first_header = _csv_header(parts[0], kinds[0], names[0])
    for part, kind, label in zip(parts[1:], kinds[1:], names[1:], strict=True):
        if _csv_header(part, kind, label) != first_header:
            raise PartsMismatchError(f"{label}: header differs from the first part's ({names[0]})")
