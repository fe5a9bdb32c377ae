"""Pruning of Kubernetes API snapshot files.

A snapshot every 15 minutes writes the whole pod list (hundreds of MB on a large cluster) under
FINOPS_DATA_DIR/kubernetes/<cluster>/. Once imported, its pods live in JobRecord and its hash on
the batch (for duplicate detection), so the file is only kept for audit and re-import: files
older than the retention are deleted, except each cluster's newest, which stays the record of
the cluster's current state whatever its age. A `.part` file is a listing that was interrupted
(the process died before the rename); after a day nothing is still writing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings

SNAPSHOT_SUFFIX = ".json"
PARTIAL_SUFFIX = ".part"
PARTIAL_MAX_AGE = timedelta(days=1)


@dataclass(frozen=True)
class PruneResult:
    files: int
    bytes: int


def kubernetes_snapshots_prune(*, now: datetime, keep_days: int) -> PruneResult:
    """Delete snapshot files older than keep_days (each cluster's newest kept) and stale
    partial files; returns what was deleted."""
    root = Path(settings.FINOPS_DATA_DIR) / "kubernetes"
    if not root.is_dir():
        return PruneResult(0, 0)
    cutoff = now - timedelta(days=keep_days)
    deleted = [
        path
        for folder in sorted(p for p in root.iterdir() if p.is_dir())
        for path in _expired(folder, cutoff=cutoff, partial_cutoff=now - PARTIAL_MAX_AGE)
    ]
    size = 0
    for path in deleted:
        size += path.stat().st_size
        path.unlink(missing_ok=True)
    return PruneResult(len(deleted), size)


def _expired(folder: Path, *, cutoff: datetime, partial_cutoff: datetime) -> list[Path]:
    snapshots = sorted(folder.glob(f"*{SNAPSHOT_SUFFIX}"), key=_taken_at)
    expired = [path for path in snapshots[:-1] if _taken_at(path) < cutoff]
    partial = [p for p in folder.glob(f"*{PARTIAL_SUFFIX}") if _modified_at(p) < partial_cutoff]
    return expired + partial


def _taken_at(path: Path) -> datetime:
    """When the snapshot was taken: from its name (kubernetes_api.snapshot_path), else mtime."""
    try:
        return datetime.strptime(path.stem, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)
    except ValueError:
        return _modified_at(path)


def _modified_at(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
