"""Join the parts of one export delivery into one file, so the delivery imports as one batch.

Restatement replaces rows by (source, billing period) in one transaction (DESIGN 4). A month
delivered as several parts must therefore arrive as one batch: one batch per part would let
part 2 replace part 1, and a failure half-way would leave the month half old, half new.

CSV parts (plain or gzip, one header each) are streamed into one gzip file with the first part's
header once; a part whose header differs is refused. Parquet parts are copied record batch by
record batch into one Parquet file; a part whose schema differs is refused. Output is
deterministic (gzip mtime 0), so importing the same delivery again is recognised as a duplicate.
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
_COPY_CHUNK = 1024 * 1024


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


def _open_csv(path: Path, kind: str) -> IO[bytes]:
    if kind == "gzip":
        return cast(IO[bytes], gzip.GzipFile(path, "rb"))
    return path.open("rb")


def _header(handle: IO[bytes]) -> bytes:
    line = handle.readline()
    return line.removeprefix(_BOM).rstrip(b"\r\n")


def _copy_csv_part(
    part: Path, kind: str, out: gzip.GzipFile, *, expected: bytes | None, first: str, label: str
) -> bytes:
    """Append a part without its header; returns the header every part must share."""
    with _open_csv(part, kind) as handle:
        header = _header(handle)
        if expected is None:
            out.write(header + b"\n")
        elif header != expected:
            raise PartsMismatchError(f"{label}: header differs from the first part's ({first})")
        last = b"\n"
        while block := handle.read(_COPY_CHUNK):
            out.write(block)
            last = block[-1:]
        if last not in (b"\n", b"\r"):
            out.write(b"\n")
    return header


def _join_csv(parts: list[Path], kinds: list[str], dest: Path, labels: list[str]) -> None:
    expected: bytes | None = None
    with (
        dest.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0) as out,
    ):
        for part, kind, label in zip(parts, kinds, labels, strict=True):
            try:
                expected = _copy_csv_part(
                    part, kind, out, expected=expected, first=labels[0], label=label
                )
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                # Named here, where the part is known: the joined file's row numbers are not.
                raise PartsMismatchError(f"{label}: gzip data is corrupt ({exc})") from None


def _join_parquet(parts: list[Path], dest: Path, labels: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer: pq.ParquetWriter | None = None
    try:
        for part, label in zip(parts, labels, strict=True):
            try:
                parquet = pq.ParquetFile(part)
                if writer is None:
                    writer = pq.ParquetWriter(dest, parquet.schema_arrow)
                elif not parquet.schema_arrow.equals(writer.schema):
                    raise PartsMismatchError(
                        f"{label}: Parquet schema differs from the first part's ({labels[0]})"
                    )
                for batch in parquet.iter_batches():
                    writer.write_batch(batch)
            except pa.ArrowException as exc:
                raise PartsMismatchError(f"{label}: cannot read Parquet ({exc})") from None
    finally:
        if writer is not None:
            writer.close()


def parts_join(parts: list[Path], *, dest_stem: Path, labels: list[str] | None = None) -> Path:
    """One local file holding every part, in order; a single part is returned as it is.

    ``dest_stem`` is the output path without suffix (".csv.gz" or ".parquet" is added);
    ``labels`` name the parts in errors (their remote keys)."""
    if not parts:
        raise SourceFetchError("delivery has no data files")
    if len(parts) == 1:
        return parts[0]
    names = labels or [str(part) for part in parts]
    kinds = [_kind(part) for part in parts]
    if "parquet" in kinds and len(set(kinds)) > 1:
        raise PartsMismatchError(f"parts mix Parquet and CSV: {', '.join(names)}")
    dest_stem.parent.mkdir(parents=True, exist_ok=True)
    if kinds[0] == "parquet":
        dest = dest_stem.with_name(dest_stem.name + ".parquet")
        _join_parquet(parts, dest, names)
    else:
        dest = dest_stem.with_name(dest_stem.name + ".csv.gz")
        _join_csv(parts, kinds, dest, names)
    return dest
