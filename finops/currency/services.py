"""Writes: load FX rates from a CSV file.

Two layouts, told apart by the header:

- pairs: `date,from,to,rate` (1 `from` = `rate` `to`), any extra columns ignored;
- the ECB history (eurofxref-hist.csv, or the .zip it ships in): `Date,USD,JPY,...`, each cell
  the price of 1 EUR in that currency, "N/A" where the ECB published none. Stored as EUR->X
  rows; cross rates (USD->JPY) are derived through EUR at lookup time (selectors.py), so the
  table holds what the ECB published and nothing rounded from it.

A file is parsed in full before anything is written: one bad row loads nothing, and a line
longer than FINOPS_MAX_LINE_BYTES fails naming the file and line before it is read whole.
Loading the same (date, from, to) again replaces its rate (the ECB revises rarely, but files
overlap).
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO

from django.db import transaction

from billing_ingest.parsers.lines import CappedText
from finops.core.errors import ImportFormatError
from finops.currency.models import RATE_QUANTUM, FxRate
from finops.org.services import data_version_bump

ECB_BASE = "EUR"
ECB_SOURCE = "ecb"
BATCH_SIZE = 5000
_ISO_CODE = re.compile(r"^[A-Z]{3}$")
_MISSING_CELLS = {"", "N/A", "NA", "-"}
PAIR_HEADER = ("date", "from", "to", "rate")


class FxRateFileError(ValueError):
    """The file is not a rate file we can read; the message names the line."""


@dataclass(frozen=True)
class FxLoadResult:
    layout: str  # "pairs" or "ecb"
    rows: int
    first_date: date | None
    last_date: date | None
    currencies: tuple[str, ...]


def currency_code(text: str) -> str:
    """' usd ' -> 'USD'; ValueError unless three letters."""
    code = text.strip().upper()
    if not _ISO_CODE.match(code):
        raise ValueError(f"not an ISO 4217 currency code: {text!r}")
    return code


def _rate(text: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"not a number: {text!r}") from None
    if not value.is_finite() or value <= 0:
        raise ValueError(f"a rate must be a positive number, not {text!r}")
    # Half even to the stored 16 places; a rate quoted finer than that moves no cent.
    return value.quantize(RATE_QUANTUM)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a date (YYYY-MM-DD): {text!r}") from None


def _capped(handle: IO[str], file_label: str) -> Iterator[str]:
    """The lines of `handle`, each at most FINOPS_MAX_LINE_BYTES: a huge line fails naming the
    file and its line instead of being read whole into memory."""
    try:
        with CappedText(handle, file_label=file_label) as lines:
            yield from lines
    except ImportFormatError as exc:
        raise FxRateFileError(f"{exc.file}: line {exc.row}: {exc.detail}") from None


def _lines(path: Path) -> Iterator[str]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.lower().endswith(".csv")]
            if len(names) != 1:
                raise FxRateFileError(f"{path.name}: expected one CSV in the zip, found {names}")
            with archive.open(names[0]) as raw:
                text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
                yield from _capped(text, f"{path.name}/{names[0]}")
        return
    yield from _capped(path.open(encoding="utf-8-sig", newline=""), path.name)


def _pair_rows(reader: Iterable[list[str]], header: list[str], source: str) -> list[FxRate]:
    index = {name: header.index(name) for name in PAIR_HEADER}
    rates = []
    for line, cells in enumerate(reader, start=2):
        if not any(c.strip() for c in cells):
            continue
        try:
            rate = FxRate(
                date=_day(cells[index["date"]]),
                from_currency=currency_code(cells[index["from"]]),
                to_currency=currency_code(cells[index["to"]]),
                rate=_rate(cells[index["rate"]]),
                source=source,
            )
        except (ValueError, IndexError) as exc:
            raise FxRateFileError(f"line {line}: {exc}") from None
        if rate.from_currency == rate.to_currency:
            raise FxRateFileError(f"line {line}: a rate from {rate.from_currency} to itself")
        rates.append(rate)
    return rates


def _ecb_rows(reader: Iterable[list[str]], header: list[str]) -> list[FxRate]:
    # The ECB file ends every line with a comma: an unnamed last column.
    try:
        columns = [(i, currency_code(name)) for i, name in enumerate(header) if i and name.strip()]
    except ValueError as exc:
        raise FxRateFileError(f"line 1: {exc}") from None
    rates = []
    for line, cells in enumerate(reader, start=2):
        if not any(c.strip() for c in cells):
            continue
        try:
            day = _day(cells[0])
            for i, code in columns:
                cell = cells[i].strip() if i < len(cells) else ""
                if cell.upper() in _MISSING_CELLS or code == ECB_BASE:
                    continue
                rates.append(
                    FxRate(
                        date=day,
                        from_currency=ECB_BASE,
                        to_currency=code,
                        rate=_rate(cell),
                        source=ECB_SOURCE,
                    )
                )
        except ValueError as exc:
            raise FxRateFileError(f"line {line}: {exc}") from None
    return rates


def _parse(path: Path) -> tuple[str, list[FxRate]]:
    reader = csv.reader(_lines(path))
    header = [h.strip() for h in next(reader, [])]
    lowered = [h.lower() for h in header]
    if all(name in lowered for name in PAIR_HEADER):
        return "pairs", _pair_rows(reader, lowered, source=path.name[:100])
    if lowered and lowered[0] == "date" and len(header) > 1:
        return "ecb", _ecb_rows(reader, header)
    raise FxRateFileError(
        f"{path.name}: header must be 'date,from,to,rate' or the ECB 'Date,USD,JPY,...'"
    )


def fx_rates_load(*, path: Path | str) -> FxLoadResult:
    """Load every rate in the file (upsert per date and pair) in one transaction."""
    path = Path(path)
    if not path.is_file():
        raise FxRateFileError(f"no such file: {path}")
    layout, rates = _parse(path)
    # One row per key: a later line of the file wins over an earlier one.
    unique = {(r.date, r.from_currency, r.to_currency): r for r in rates}
    with transaction.atomic():
        FxRate.objects.bulk_create(
            unique.values(),
            batch_size=BATCH_SIZE,
            update_conflicts=True,
            unique_fields=["date", "from_currency", "to_currency"],
            update_fields=["rate", "source", "loaded_at"],
        )
        data_version_bump()  # converted amounts change: cached answers are stale
    days = [key[0] for key in unique]
    currencies = {key[1] for key in unique} | {key[2] for key in unique}
    return FxLoadResult(
        layout=layout,
        rows=len(unique),
        first_date=min(days, default=None),
        last_date=max(days, default=None),
        currencies=tuple(sorted(currencies)),
    )
