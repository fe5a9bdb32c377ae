"""No "team(s)", "job(s)" or "anomaly(ies)" in what people read: pages, emails, command output and
error messages say "1 team" and "3 teams" (finops/core/wording.py, Django's pluralize)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from finops.core.wording import counted, plural

ROOT = Path(__file__).resolve().parents[2]
# A word followed by a parenthesised plural ending; "http(s)" is a scheme, not a count.
HEDGE = re.compile(r"\b(?!https?\(s\))[A-Za-z]+\((?:s|es|ies)\)")
SOURCES = [
    *sorted((ROOT / "templates").rglob("*.html")),
    *sorted((ROOT / "templates").rglob("*.txt")),
    *sorted(p for p in (ROOT / "finops").rglob("*.py") if "migrations" not in p.parts),
    *sorted(p for p in (ROOT / "billing_ingest").rglob("*.py") if "migrations" not in p.parts),
]


def _texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) people may read: a template whole; of Python, its string literals (f-strings
    included; comments and code such as `Decimal(s)` are not text)."""
    source = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return list(enumerate(source.splitlines(), start=1))
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.STRING]


def _hedges(path: Path) -> list[str]:
    if path.name == "wording.py":  # its docstring names what it replaces
        return []
    return [
        f"{path.relative_to(ROOT)}:{number}: {m.group(0)}"
        for number, text in _texts(path)
        for m in HEDGE.finditer(text)
    ]


def test_no_parenthesised_plurals_in_what_people_read() -> None:
    assert len(SOURCES) > 300  # the scan sees the project, not an empty folder
    hedges = [h for path in SOURCES for h in _hedges(path)]
    assert hedges == []


def test_the_scan_finds_a_hedge(tmp_path: Path) -> None:
    # The pattern itself: what it must catch and what it must let through.
    assert HEDGE.findall('f"{n} team(s) got a statement"') == ["team(s)"]
    assert HEDGE.findall("open cost anomaly(ies)") == ["anomaly(ies)"]
    assert HEDGE.findall("not an http(s) URL") == []
    code = tmp_path / "example.py"
    code.write_text('x = Decimal(s)  # job(s)\nmessage = f"{n} job(s) failed"\n', encoding="utf-8")
    assert [text for _line, text in _texts(code) if HEDGE.search(text)] == ['f"{n} job(s) failed"']


@pytest.mark.parametrize(
    ("count", "word", "expected"),
    [
        (0, "team", "0 teams"),
        (1, "team", "1 team"),
        (2, "team", "2 teams"),
        (1532, "run", "1,532 runs"),
        (1, "anomaly", "1 anomaly"),
        (3, "anomaly", "3 anomalies"),
        (2, "billing source fetch", "2 billing source fetches"),
    ],
)
def test_counted_agrees_with_its_count(count: int, word: str, expected: str) -> None:
    assert counted(count, word) == expected


def test_plural_of_one_is_the_word() -> None:
    assert plural("column", 1) == "column"
    assert plural("column", 2) == "columns"
