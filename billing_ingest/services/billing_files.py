"""Billing files as they are found: what a file in a folder holds, told by its content
(billing_file_kind), and the source a file is imported under when the caller names none
(billing_default_source). Reads only."""

from __future__ import annotations

from pathlib import Path

from billing_ingest.models import ImportBatch
from billing_ingest.parsers.values import GZIP_MAGIC, PARQUET_MAGIC, ZIP_MAGIC

_SOURCE_SUFFIXES = (".gz", ".csv", ".parquet")


def billing_default_source(*, format: str, path: Path) -> str:
    """`<format>:<file name without .csv/.gz/.parquet suffixes>`, e.g. focus:acme-2024-09 for
    acme-2024-09.csv.gz. One source per file means files never restate each other unless the
    caller names a shared source on purpose."""
    name = path.name
    stripped = True
    while stripped:
        stripped = False
        for suffix in _SOURCE_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                stripped = True
    # Cut to the column (ImportBatch.source): a 255-character file name would not fit.
    return f"{format}:{name}"[: ImportBatch._meta.get_field("source").max_length]


# Names beside the exports that are documents, not data, whatever their text looks like:
# manifests (JSON), notes, reports. Their content is still checked for Parquet and gzip.
_DOCUMENT_SUFFIXES = frozenset({".json", ".md", ".txt", ".html", ".pdf", ".xml", ".yaml", ".yml"})


_HEAD_BYTES = 4096


def billing_file_kind(path: Path) -> str | None:
    """What a file found in a folder holds, told by its content as the parsers tell it (AWS and
    Athena write Parquet parts without an extension): "parquet", "gzip", "zip", "csv", "json"
    (a suffix-less JSON-lines shard, as BigQuery names them), or None for anything else, such
    as manifests, notes and reports sitting beside the exports."""
    with path.open("rb") as handle:
        head = handle.read(_HEAD_BYTES)
    if head[:4] == PARQUET_MAGIC:
        return "parquet"
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if head[:4] == ZIP_MAGIC:
        return "zip"
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"  # named CSV: the parser judges (and names the row of) what is wrong
    if suffix in _DOCUMENT_SUFFIXES or b"\x00" in head:
        return None
    try:
        # The head may end inside a multi-byte character: decode what is whole.
        text = head.decode("utf-8-sig", errors="strict")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:
            return None
        text = head[: exc.start].decode("utf-8-sig")
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first_line.startswith("{"):
        return "json" if not suffix else None
    # A CSV header: several comma-separated column names.
    if first_line.count(",") >= 1 and all(name.strip() for name in first_line.split(",")[:2]):
        return "csv"
    return None


def billing_file_wanted(path: Path) -> bool:
    """Whether a file found in a folder holds billing data (billing_file_kind)."""
    return billing_file_kind(path) is not None
