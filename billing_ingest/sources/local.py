"""Where a downloaded part goes on disk: never where its remote name says.

Object keys and blob names are chosen by whoever can write to the bucket or container, and may
hold ``..``, start with ``/`` or repeat slashes, so a local path built from their folders could
land outside the download folder (or on top of another part). Each part is therefore written to
a numbered file directly in the folder; only its name's trailing suffixes are kept, because the
parsers fall back on ``.gz`` and ``.parquet`` when a file's first bytes do not decide its format.
The remote name stays the part's label, which is what errors show.
"""

from __future__ import annotations

import re
from pathlib import Path

# ".csv", ".gz", ".parquet", ".snappy", ".jsonl": short, and nothing a path could be made of.
_SUFFIX_RE = re.compile(r"\.[A-Za-z0-9]{1,12}")
# Enough for ".csv.gz" and ".snappy.parquet"; a name with more dots is not a format's.
_MAX_SUFFIXES = 2


def _suffixes(remote_name: str) -> str:
    base = remote_name.rsplit("/", 1)[-1]
    pieces = base.split(".")[1:]  # "part_0_0001.csv.gz" -> ["csv", "gz"]
    kept: list[str] = []
    for piece in reversed(pieces[-_MAX_SUFFIXES:]):
        if not _SUFFIX_RE.fullmatch(f".{piece}"):
            break  # keep only the unbroken tail: ".csv.gz", not "..gz"
        kept.insert(0, f".{piece}")
    return "".join(kept)


def local_part_path(dest: Path, number: int, remote_name: str) -> Path:
    """``dest/NNNNN<suffixes>`` for the ``number``-th part of a delivery, creating ``dest``:
    part 2 named ``exports/../../etc/x.csv.gz`` is ``dest/00002.csv.gz``."""
    dest.mkdir(parents=True, exist_ok=True)
    return dest / f"{number:05d}{_suffixes(remote_name)}"
