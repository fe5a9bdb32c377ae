"""Inference usage parsers, one module per format behind a small registry.

A parser is a callable (paths, *, labels) -> list of dicts keyed by InferenceUsage field names
(without batch and cluster), already aggregated per series key and window. It reads every file
before returning (increases need consecutive samples, which may sit in different files) and
raises finops.core.errors.ImportFormatError naming file, line and field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from finops.inference.parsers.prometheus import parse_prometheus
from finops.inference.parsers.usage_csv import parse_usage_csv

UsageRows = list[dict[str, Any]]
UsageParser = Callable[[Sequence[Path]], UsageRows]

USAGE_PARSERS: dict[str, UsageParser] = {
    "prometheus": parse_prometheus,
    "csv": parse_usage_csv,
}


def usage_parser(name: str) -> UsageParser:
    try:
        return USAGE_PARSERS[name]
    except KeyError:
        known = ", ".join(sorted(USAGE_PARSERS))
        raise ValueError(f"unknown inference usage format {name!r}; known: {known}") from None
