"""Exact money in the database, on PostgreSQL and on the embedded SQLite default alike.

SQLite keeps only 15 significant digits in a NUMERIC column and sums in floating point, which
breaks "totals are conserved to the last stored decimal" for amounts like 12345.678901234567.
So on SQLite a MoneyField is stored as text (exact) and summed with a Python Decimal aggregate
registered on every connection; on PostgreSQL it is plain numeric and SUM.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Context, Decimal, Inexact, InvalidOperation
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.models import Sum
from django.db.models.sql.compiler import SQLCompiler

SQLITE_SUM_FUNCTION = "FINOPS_DECIMAL_SUM"

# FOCUS samples carry up to 11 decimals; 12 keeps every one of them exact.
MONEY_DIGITS = 28
MONEY_PLACES = 12
MONEY_QUANTUM = Decimal(1).scaleb(-MONEY_PLACES)

# The one exact context of the app (no other module makes a wide Context: a test in tests/core
# sees to it): 80 significant digits. A product of two 28-digit amounts (56 digits) is exact, a
# sum of any number of 12-place amounts below 10**60 is exact, and a quotient is rounded once, in
# its 80th digit, far below every stored decimal.
EXACT_DIGITS = 80
EXACT = Context(prec=EXACT_DIGITS, rounding=ROUND_HALF_EVEN)


def exact_context(*, rounding: str = ROUND_HALF_EVEN, traps: list[type] | None = None) -> Context:
    """EXACT's precision with another rounding (a lower or upper bound, a figure cut down) or
    other traps (None: the default ones, as EXACT's)."""
    if traps is None:
        return Context(prec=EXACT_DIGITS, rounding=rounding)
    return Context(prec=EXACT_DIGITS, rounding=rounding, traps=traps)


# Where SQLite's sums add: EXACT's digits (a column holds 28, a sum of many rows more; the
# default context would round the 29th away). Adding traps Inexact, so a sum that would not
# fit fails instead of rounding silently.
_SUM_CONTEXT = exact_context(traps=[InvalidOperation, Inexact])


def money_field(**kwargs: Any) -> MoneyField:
    return MoneyField(max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, **kwargs)


class MoneyField(models.DecimalField):
    # Not "DecimalField": SQLite's backend would run its float converter over the text value.
    def get_internal_type(self) -> str:
        return "MoneyField"

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if connection.vendor == "sqlite":
            return "text"
        return connection.data_types["DecimalField"] % self.db_type_parameters(connection)

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        if value is None or isinstance(value, Decimal):
            return value
        # Text from SQLite (exact); quantize so both databases hand back the same scale.
        return Decimal(str(value)).quantize(Decimal(1).scaleb(-self.decimal_places), context=EXACT)


class MoneySum(Sum):
    """SUM that stays exact on SQLite (Decimal in Python) and is plain SUM on PostgreSQL."""

    def as_sqlite(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra_context: Any
    ) -> Any:
        return self.as_sql(compiler, connection, function=SQLITE_SUM_FUNCTION, **extra_context)


def exact_sum(name: str, *, decimal_places: int) -> MoneySum:
    """SUM of a plain DecimalField (GPU-seconds, say), exact on SQLite too: there the column is
    stored as a float and SQL SUM adds floats (a run's thousands of fractional GPU-seconds lose
    digits), so it is summed as the money is, in Python Decimals, and read back as text."""
    return MoneySum(
        name, output_field=MoneyField(max_digits=MONEY_DIGITS, decimal_places=decimal_places)
    )


class _DecimalSum:
    def __init__(self) -> None:
        self.total: Decimal | None = None

    def step(self, value: object) -> None:
        if value is not None:
            self.total = _SUM_CONTEXT.add(self.total or Decimal(0), Decimal(str(value)))

    def finalize(self) -> str | None:
        return None if self.total is None else str(self.total)


def _register_sqlite_functions(
    sender: object, connection: BaseDatabaseWrapper, **kwargs: object
) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_aggregate(SQLITE_SUM_FUNCTION, 1, _DecimalSum)


connection_created.connect(_register_sqlite_functions)


def decimal_text(value: Decimal) -> str:
    """A Decimal as text for people and files: fixed-point with every place it holds, never an
    exponent (str() writes a zero of 12 places as "0E-12" and 10^30 as "1E+30"), and never
    "-0". The one way the API, the CSV files and the pages write a Decimal that is not
    quantized by a field of its own (tests/core/test_decimal_text.py)."""
    if value.is_zero():
        value = value.copy_abs()
    return format(value, "f")


class ExactDecimalField(models.Field):  # type: ignore[type-arg]
    """A Decimal kept as its own text: read back equal AND with the same places (str(value)
    round-trips), whatever its scale. For stored figures that must read back identical to the
    read-time computation they replace (exact sums, not quantized to a column's places), not
    for amounts the database sums (those are MoneyField)."""

    # What the django-stubs mypy plugin types the attribute as (a TextField's are str).
    _pyi_private_set_type: Decimal | str
    _pyi_private_get_type: Decimal

    def get_internal_type(self) -> str:
        return "TextField"  # stored as text on every database

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        return None if value is None else Decimal(value)

    def to_python(self, value: Any) -> Any:
        return None if value is None or isinstance(value, Decimal) else Decimal(str(value))

    def get_prep_value(self, value: Any) -> Any:
        return None if value is None else str(Decimal(value))
