"""Reading a page's HTML tables as text, as a reader sees them (tags stripped, cells trimmed)."""

from __future__ import annotations

import re


def table_rows(html: str, table_id: str) -> list[list[str]]:
    """The text of each row (header first) of the table with that id."""
    found = re.search(rf'<table[^>]*id="{table_id}".*?</table>', html)
    assert found is not None, f"no table with id {table_id!r} on the page"
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(0))
    ]


def match(pattern: str, html: str, flags: int = 0) -> re.Match[str]:
    """re.search that fails the test, naming the pattern, when the page does not hold it."""
    found = re.search(pattern, html, flags)
    assert found is not None, f"{pattern!r} is not on the page"
    return found
