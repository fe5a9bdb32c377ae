"""One month formatter (issue 26): a month is written "YYYY-MM" by finops.core.months
(month_format, or the month_param template filter that calls it), never by a hand-written
strftime, f-string format or template date filter beside it, so the form cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The helper itself, where it lives now and where the renovation moves it.
HELPERS = {"finops/core/months.py"}
SKIPPED_DIRS = {".venv", ".git", "node_modules", ".azurite", "staticfiles", "var", "__pycache__"}
PY_MONTH = re.compile(r"%Y-%m(?!-)")
TEMPLATE_MONTH = re.compile(r"""\|\s*date\s*:\s*["']Y-m["']""")


def month_formats_in(text: str, suffix: str) -> list[int]:
    """Line numbers in `text` that write a month out by hand."""
    pattern = PY_MONTH if suffix == ".py" else TEMPLATE_MONTH
    return [n for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


def _sources() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        parts = set(path.relative_to(ROOT).parts)
        if parts & SKIPPED_DIRS or path.suffix not in {".py", ".html", ".txt"}:
            continue
        found.append(path)
    return found


def test_no_month_is_formatted_outside_the_helper() -> None:
    offenders = []
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        if relative in HELPERS or path == Path(__file__).resolve():
            continue
        lines = month_formats_in(path.read_text(errors="replace"), path.suffix)
        offenders += [f"{relative}:{n}" for n in lines]
    assert offenders == [], (
        "write a month with finops.core.months.month_format (templates: |month_param)"
    )


def test_the_check_sees_every_spelling() -> None:
    code = (
        'a = d.strftime("%Y-%m")\n'
        'b = f"{d:%Y-%m}"\n'
        'c = f"{d:%Y-%m-%d}"\n'
        "e = datetime.strptime(t, '%Y-%m')\n"
    )
    assert month_formats_in(code, ".py") == [1, 2, 4]
    page = '{{ m|date:"Y-m" }}\n{{ m|date:\'Y-m\' }}\n{{ m|date:"Y-m-d" }}\n{{ m|month_param }}\n'
    assert month_formats_in(page, ".html") == [1, 2]
