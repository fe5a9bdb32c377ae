"""Check that the parts of one export delivery belong together, before they are imported.

A delivery (one month's manifest or export run) is imported as ONE batch whose parts are loaded
by one task each (billing_ingest.services.billing): restatement replaces rows by (source,
billing period), so the parts must not replace each other, and a failure in any part must leave
the month as it was. Parts are therefore never joined into one file; this module only refuses a
delivery whose parts cannot be one table: parts of different formats (Parquet, CSV, JSON), a CSV
part whose header differs from the first part's, or a Parquet part whose schema differs. Only
headers, the first bytes of JSON and Parquet footers are read, so the check costs nothing next
to the import.

JSON parts have no header to compare: the first line of a JSON-lines shard (BigQuery's export)
is a record, and records differ in their keys (BigQuery leaves NULL fields out), while an
OpenCost response is one document whose first line is a lone ``{``. The parser checks every
record; here JSON parts are only required not to be mixed with CSV or Parquet.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from billing_ingest.parsers.lines import max_line_bytes
from billing_ingest.sources import SourceFetchError

_GZIP = b"\x1f\x8b"
_PARQUET = b"PAR1"
_BOM = b"\xef\xbb\xbf"
# Bytes read to find a text part's first character: a JSON part starts with "{" (after a BOM
# or blank lines), as the gcp-bigquery parser tells JSON lines from CSV.
_HEAD_BYTES = 64 * 1024
_BLOCK_BYTES = 1024
_KIND_NAMES = {"parquet": "Parquet", "csv": "CSV", "json": "JSON"}


class PartsMismatchError(SourceFetchError):
    """Parts of one delivery do not share a format, header or schema, or one is unreadable."""


@dataclass(frozen=True)
class _Part:
    path: Path
    label: str
    kind: str  # "parquet", "csv" or "json"
    gzipped: bool


def _open(part_path: Path, *, gzipped: bool) -> IO[bytes]:
    return cast(IO[bytes], gzip.GzipFile(part_path, "rb") if gzipped else part_path.open("rb"))


def _corrupt(label: str, exc: Exception) -> PartsMismatchError:
    return PartsMismatchError(f"{label}: gzip data is corrupt ({exc})")


def _first_character(path: Path, *, gzipped: bool, label: str) -> bytes:
    """The first byte that is not blank (nor a BOM), read a little at a time so that a gzip
    part truncated further on is left for the parser to report by row."""
    seen = b""
    try:
        with _open(path, gzipped=gzipped) as handle:
            while len(seen) < _HEAD_BYTES and (block := handle.read(_BLOCK_BYTES)):
                seen += block
                text = seen.removeprefix(_BOM).lstrip()
                if text:
                    return text[:1]
    except (EOFError, OSError, zlib.error) as exc:
        raise _corrupt(label, exc) from None
    return b""


def _part(path: Path, label: str) -> _Part:
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic == _PARQUET:
        return _Part(path, label, "parquet", gzipped=False)
    gzipped = magic[:2] == _GZIP
    first = _first_character(path, gzipped=gzipped, label=label)
    return _Part(path, label, "json" if first == b"{" else "csv", gzipped)


def _csv_header(part: _Part) -> bytes:
    limit = max_line_bytes()
    try:
        with _open(part.path, gzipped=part.gzipped) as handle:
            line = handle.readline(limit + 1)
    except (EOFError, OSError, zlib.error) as exc:
        raise _corrupt(part.label, exc) from None
    if len(line) > limit and not line.endswith(b"\n"):
        raise PartsMismatchError(
            f"{part.label}: header line is longer than {limit:,} bytes (FINOPS_MAX_LINE_BYTES)"
        )
    return line.removeprefix(_BOM).rstrip(b"\r\n")


def _parquet_schema(part: _Part) -> object:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(part.path).schema_arrow
    except pa.ArrowException as exc:
        raise PartsMismatchError(f"{part.label}: cannot read Parquet ({exc})") from None


def _same_format(parts: list[_Part]) -> None:
    kinds = {part.kind for part in parts}
    if len(kinds) > 1:
        mixed = " and ".join(name for kind, name in _KIND_NAMES.items() if kind in kinds)
        names = ", ".join(part.label for part in parts)
        raise PartsMismatchError(f"parts mix {mixed}: {names}")


def _same_schema(parts: list[_Part]) -> None:
    first_schema = _parquet_schema(parts[0])
    for part in parts[1:]:
        if not _parquet_schema(part).equals(first_schema):  # type: ignore[attr-defined]
            raise PartsMismatchError(
                f"{part.label}: Parquet schema differs from the first part's ({parts[0].label})"
            )


def _same_header(parts: list[_Part]) -> None:
    first_header = _csv_header(parts[0])
    for part in parts[1:]:
        if _csv_header(part) != first_header:
            raise PartsMismatchError(
                f"{part.label}: header differs from the first part's ({parts[0].label})"
            )


def parts_check(parts: list[Path], *, labels: list[str] | None = None) -> None:
    """Raise PartsMismatchError unless every part has the first part's format and, for CSV
    (plain or gzip), its header or, for Parquet, its schema. ``labels`` name the parts in
    errors (remote keys)."""
    if not parts:
        raise SourceFetchError("delivery has no data files")
    if len(parts) == 1:
        return  # nothing to compare with; the parser reads the part
    names = labels or [str(part) for part in parts]
    checked = [_part(path, label) for path, label in zip(parts, names, strict=True)]
    _same_format(checked)
    if checked[0].kind == "parquet":
        _same_schema(checked)
    elif checked[0].kind == "csv":
        _same_header(checked)
