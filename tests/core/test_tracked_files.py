"""What must never be committed: databases and their journals (a committed SQLite WAL is replayed
into the next checkout's fresh database), environment files and virtualenvs."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ["*.sqlite3", "*.sqlite3-*", "*.db", ".env", ".venv/*", "var/*", "staticfiles/*"]


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("the suite runs from a git checkout (CI clones the repository)")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    )
    return [name for name in listed.stdout.split("\0") if name]


def forbidden(names: list[str]) -> list[str]:
    return [n for n in names if any(fnmatch.fnmatch(n, pattern) for pattern in FORBIDDEN)]


def test_no_database_or_environment_file_is_tracked() -> None:
    names = _tracked()
    assert "manage.py" in names  # the listing is the repository's
    assert forbidden(names) == []


def test_the_patterns_catch_what_was_once_committed() -> None:
    assert forbidden(["db.sqlite3-wal", "db.sqlite3-shm", "db.sqlite3", "finops/x.py"]) == [
        "db.sqlite3-wal",
        "db.sqlite3-shm",
        "db.sqlite3",
    ]
