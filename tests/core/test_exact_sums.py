"""No plain SQL SUM of a decimal column in product code: SQLite stores a DecimalField as a float
and its SUM adds floats, so every sum of money, GPU-seconds, kWh... goes through
finops.core.money.MoneySum or exact_sum (a Python Decimal aggregate there, SUM on PostgreSQL).
A plain `Sum(...)` stays allowed over a field that is no DecimalField of any model (a count)."""

from __future__ import annotations

import ast
from pathlib import Path

from django.apps import apps
from django.db import models

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("finops", "billing_ingest", "bench")
SUM_MODULES = ("django.db.models", "django.db.models.aggregates")


def decimal_field_names() -> set[str]:
    """The name of every DecimalField (MoneyField included) of every installed model."""
    return {
        field.name
        for model in apps.get_models()
        for field in model._meta.get_fields()
        if isinstance(field, models.DecimalField)
    }


def _sum_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound to Django's Sum, names bound to a module holding it) in the module."""
    names, holders = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in SUM_MODULES:
            names |= {a.asname or a.name for a in node.names if a.name == "Sum"}
        elif isinstance(node, ast.ImportFrom) and node.module == "django.db":
            holders |= {a.asname or a.name for a in node.names if a.name == "models"}
        elif isinstance(node, ast.Import):
            holders |= {a.asname for a in node.names if a.name in SUM_MODULES and a.asname}
    return names, holders


def _field_of(argument: ast.expr) -> str | None:
    """The field a Sum adds up: "gpu_seconds" of "gpu_seconds", F("gpu_seconds") or
    "job__gpus"'s last part; None when it is an expression this scan cannot name."""
    if (
        isinstance(argument, ast.Call)
        and isinstance(argument.func, ast.Name)
        and argument.func.id == "F"
        and argument.args
    ):
        return _field_of(argument.args[0])
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value.split("__")[-1]
    return None


def plain_decimal_sums(source: str, decimal_fields: set[str]) -> list[tuple[int, str]]:
    """(line, what) of each Django Sum(...) over a decimal field, or over an expression."""
    tree = ast.parse(source)
    names, holders = _sum_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        is_sum = (isinstance(func, ast.Name) and func.id in names) or (
            isinstance(func, ast.Attribute)
            and func.attr == "Sum"
            and isinstance(func.value, ast.Name)
            and func.value.id in holders
        )
        if not is_sum:
            continue
        field = _field_of(node.args[0]) if node.args else None
        if field is None:
            found.append((node.lineno, ast.unparse(node)))
        elif field in decimal_fields:
            found.append((node.lineno, f"Sum of the decimal field {field!r}"))
    return found


def test_the_scan_finds_plain_decimal_sums() -> None:
    fields = {"gpu_seconds", "amount"}
    source = (
        "from django.db.models import F, Sum\n"
        "from django.db.models import Sum as S\n"
        "from django.db import models\n"
        "a = Sum('gpu_seconds')\n"
        "b = S(F('amount'))\n"
        "c = models.Sum('job__gpu_seconds')\n"
        "d = Sum(F('a') * F('b'))\n"
        "e = Sum('row_count')\n"
        "f = MoneySum('amount')\n"
        "g = exact_sum('gpu_seconds', decimal_places=6)\n"
    )
    assert [line for line, _ in plain_decimal_sums(source, fields)] == [4, 5, 6, 7]


def test_the_decimal_fields_are_the_models() -> None:
    fields = decimal_field_names()
    assert {"gpu_seconds", "amount", "effective_cost", "gpu_kwh", "co2e_kg"} <= fields
    assert "row_count" not in fields


def test_no_plain_sum_over_a_decimal_field() -> None:
    fields = decimal_field_names()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, what in plain_decimal_sums(path.read_text(), fields)
    ]
    assert offenders == [], "use finops.core.money.MoneySum or exact_sum:\n" + "\n".join(offenders)
