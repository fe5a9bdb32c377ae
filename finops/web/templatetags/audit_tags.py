"""The audit log's details as readable text: nested keys as an indented list, decimal strings
without the ledger's trailing zeros (650.250000000000 -> 650.25; every significant digit kept),
no Python or JSON syntax."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from django import template
from django.utils.html import escape, format_html_join
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

DECIMAL_TEXT = re.compile(r"^-?\d+\.\d+$")


def readable_scalar(value: Any) -> str:
    """A leaf value as text: a decimal string trimmed to its significant digits (at least
    cents), booleans as yes/no, None as a dash."""
    if value is None:
        return "\u2013"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    if DECIMAL_TEXT.match(text):
        digits = text.rstrip("0")
        places = len(digits.split(".")[1])
        return f"{Decimal(text):,.{max(places, 2)}f}"
    return text


def _render(value: Any) -> str:
    if isinstance(value, dict):
        if not value:
            return "\u2013"
        items = format_html_join(
            "",
            '<li><span class="key">{}</span>: {}</li>',
            ((str(k), mark_safe(_render(v))) for k, v in value.items()),
        )
        return f'<ul class="audit-details">{items}</ul>'
    if isinstance(value, list):
        return ", ".join(_render(v) for v in value) if value else "\u2013"
    return str(escape(readable_scalar(value)))


@register.filter
def audit_details(details: Any) -> SafeString:
    """Render an event's details (JSON: dicts, lists, strings, numbers) as nested lists."""
    return mark_safe(_render(details))
