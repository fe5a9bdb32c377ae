"""Parsers, one module per format, behind a small registry.

A billing parser is a callable (path, *, file_label) -> iterator of chunks, each chunk a list of
dicts whose keys are CostLineItem field names, already normalised (Decimal money, UTC datetimes).
It raises finops.core.errors.ImportFormatError naming file, row and column.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path

from billing_ingest.parsers.rows import LineItemRow

LineItemChunks = Iterator[list[LineItemRow]]
BillingParser = Callable[..., LineItemChunks]

BILLING_PARSERS: dict[str, BillingParser] = {}
# Formats whose parser never queries the database, so it may run in a thread of its own, ahead
# of the COPY of its previous chunk (billing_ingest/loading/prefetch.py).
DATABASE_FREE_PARSERS: set[str] = set()


def register_billing_parser(
    name: str, *, database_free: bool = False
) -> Callable[[BillingParser], BillingParser]:
    def decorator(parser: BillingParser) -> BillingParser:
        BILLING_PARSERS[name] = parser
        if database_free:
            DATABASE_FREE_PARSERS.add(name)
        return parser

    return decorator


# Modules that register billing parsers (imported on first use so the registry fills lazily).
BILLING_FORMAT_MODULES = (
    "focus",
    "aws_cur",
    "opencost_cloudcost",
    "gcp_billing",
    "azure_cost",
    "coreweave",
    "coreweave_invoice",
)


def _billing_modules_load() -> None:
    for module in BILLING_FORMAT_MODULES:
        importlib.import_module(f"billing_ingest.parsers.{module}")


def billing_formats() -> list[str]:
    """Every billing format's name, sorted (the registry filled first: it fills lazily, so
    reading BILLING_PARSERS directly sees only the formats something happened to import)."""
    _billing_modules_load()
    return sorted(BILLING_PARSERS)


def billing_parser(name: str) -> BillingParser:
    _billing_modules_load()
    try:
        return BILLING_PARSERS[name]
    except KeyError:
        known = ", ".join(sorted(BILLING_PARSERS))
        raise ValueError(f"unknown billing format {name!r}; known: {known}") from None


def billing_paths(path: Path) -> list[Path]:
    """A file, or every regular file below a folder (sorted, hidden files skipped)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    return [path]
