"""What must never be committed: databases and their journals (a committed SQLite WAL is replayed
into the next checkout's fresh database), environment files and virtualenvs, and a merge's
conflict markers (the README carried one, and 590 stale lines with it, for a day)."""

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


# Where a conflicted merge leaves its sides: the markers at the start of a line.
CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ")
TEXT_SUFFIXES = {".py", ".md", ".html", ".txt", ".toml", ".cfg", ".json", ".css", ".js", ".yml",
                 ".yaml", ".csv", ".sh", ""}  # fmt: skip


def conflicted(name: str, text: str) -> list[str]:
    return [
        f"{name}:{number}"
        for number, line in enumerate(text.splitlines(), start=1)
        if line.startswith(CONFLICT_MARKERS)
    ]


def test_no_tracked_file_holds_merge_conflict_markers() -> None:
    found: list[str] = []
    for name in _tracked():
        path = ROOT / name
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        found += conflicted(name, path.read_text(errors="replace"))
    assert found == []


def test_the_markers_are_found_at_a_line_start_only() -> None:
    text = "a\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> h-waste\n  <<<<<<< quoted\n"
    assert conflicted("README.md", text) == ["README.md:2", "README.md:6"]
