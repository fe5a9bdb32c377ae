"""Kubernetes API snapshot files are deleted after the retention, except each cluster's newest,
and interrupted `.part` files after a day; the daily task is on the beat schedule."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pytest_django import Settings

from billing_ingest.services.snapshots import kubernetes_snapshots_prune
from billing_ingest.sources.kubernetes_api import snapshot_path
from billing_ingest.tasks.kubernetes import prune_kubernetes_snapshots
from finops.celery import app

NOW = datetime(2025, 6, 20, 12, tzinfo=UTC)


@pytest.fixture
def data_dir(tmp_path: Path, settings: Settings) -> Path:
    settings.FINOPS_DATA_DIR = tmp_path
    return tmp_path


def snapshot(
    cluster: str, days_ago: float, body: str = '{"items": []}', *, now: datetime = NOW
) -> Path:
    path = snapshot_path(cluster_name=cluster, taken_at=now - timedelta(days=days_ago))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def test_old_snapshots_go_and_recent_ones_stay(data_dir: Path) -> None:
    old = [snapshot("gpu-east", 9), snapshot("gpu-east", 8)]
    recent = [snapshot("gpu-east", 6.9), snapshot("gpu-east", 0.01)]
    result = kubernetes_snapshots_prune(now=NOW, keep_days=7)
    assert [p.exists() for p in old + recent] == [False, False, True, True]
    assert (result.files, result.bytes) == (2, sum(len('{"items": []}') for _ in old))


def test_the_newest_snapshot_of_a_cluster_stays_whatever_its_age(data_dir: Path) -> None:
    older, newest = snapshot("idle-cluster", 40), snapshot("idle-cluster", 30)
    other = snapshot("gpu-west", 20)
    kubernetes_snapshots_prune(now=NOW, keep_days=7)
    assert (older.exists(), newest.exists(), other.exists()) == (False, True, True)


def test_interrupted_partial_files_go_after_a_day(data_dir: Path) -> None:
    folder = snapshot("gpu-east", 0).parent
    stale, fresh = folder / "tmpa.part", folder / "tmpb.part"
    for path, age in ((stale, timedelta(hours=25)), (fresh, timedelta(hours=1))):
        path.write_text("{")
        moment = (NOW - age).timestamp()
        os.utime(path, (moment, moment))
    kubernetes_snapshots_prune(now=NOW, keep_days=7)
    assert (stale.exists(), fresh.exists()) == (False, True)


def test_pruning_twice_deletes_nothing_more(data_dir: Path) -> None:
    snapshot("gpu-east", 10), snapshot("gpu-east", 1)
    assert kubernetes_snapshots_prune(now=NOW, keep_days=7).files == 1
    assert kubernetes_snapshots_prune(now=NOW, keep_days=7).files == 0


def test_no_snapshot_folder_is_nothing_to_do(data_dir: Path) -> None:
    assert kubernetes_snapshots_prune(now=NOW, keep_days=7).files == 0


def test_the_task_uses_the_retention_setting(data_dir: Path, settings: Settings) -> None:
    settings.FINOPS_KUBERNETES_SNAPSHOT_DAYS = 30
    # The task prunes relative to the real clock.
    now = datetime.now(UTC)
    snapshot("gpu-east", 2, now=now), snapshot("gpu-east", 1, now=now)
    assert prune_kubernetes_snapshots.delay().get() == {"files": 0, "bytes": 0}
    settings.FINOPS_KUBERNETES_SNAPSHOT_DAYS = 1
    assert prune_kubernetes_snapshots.delay().get()["files"] == 1


def test_pruning_runs_daily_on_the_beat_schedule() -> None:
    (entry,) = (
        e for e in app.conf.beat_schedule.values() if e["task"] == prune_kubernetes_snapshots.name
    )
    assert entry["options"]["expires"] < 24 * 3600
    assert len(entry["schedule"].hour) == 1
    assert len(entry["schedule"].minute) == 1
