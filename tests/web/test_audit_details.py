"""The audit log page shows an event's details as readable nested lists, decimal strings
trimmed to their significant digits, and escapes what it shows (issue 29)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from finops.audit.services import audit_record
from finops.web.templatetags.audit_tags import readable_scalar

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("650.250000000000", "650.25"),
        ("1234567.000000000000", "1,234,567.00"),
        ("0.123456789000", "0.123456789"),
        ("-5.5", "-5.50"),
        ("2025-09", "2025-09"),
        (None, "\u2013"),
        (True, "yes"),
        (7, "7"),
    ],
)
def test_readable_scalar(value: object, text: str) -> None:
    assert readable_scalar(value) == text


def test_audit_page_details(finance_client: Client) -> None:
    audit_record(
        actor=None,
        action="period.close",
        obj_repr="2025-09",
        details={
            "close_id": 3,
            "currency": "USD",
            "teams": {"vision": {"total": Decimal("650.250000000000"), "native": {"USD": "1"}}},
            "note": "<script>x</script>",
        },
    )
    text = finance_client.get("/audit/").content.decode()
    assert '<span class="key">total</span>: 650.25' in text
    assert '<span class="key">USD</span>: 1' in text
    assert "650.250000000000" not in text
    assert "{'" not in text
    assert "&lt;script&gt;x&lt;/script&gt;" in text
    assert "<script>x</script>" not in text
