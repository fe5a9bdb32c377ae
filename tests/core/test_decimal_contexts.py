"""One exact Decimal context: product code makes no Context (or localcontext) of its own precision
outside finops/core/money.py, which names EXACT (80 digits) and exact_context (its digits with
another rounding or traps). 21 modules once chose digits of their own (40, 50, 60 or 80)."""

from __future__ import annotations

import ast
from decimal import Decimal, Inexact
from fractions import Fraction
from pathlib import Path

from finops.core.money import EXACT, EXACT_DIGITS, exact_context

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("finops", "billing_ingest", "bench", "scripts")
ALLOWED = {
    "finops/core/money.py",
    # The engine stays importable without Django (money.py is not): its one Decimal division
    # (GPU-seconds, 50 digits, far below the 6 stored decimals) stays its own.
    "finops/attribution/engine/units.py",
}


def own_precisions(source: str) -> list[int]:
    """Lines that make a Context or localcontext with a precision of their own."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in {"Context", "localcontext"} and any(k.arg == "prec" for k in node.keywords):
            lines.append(node.lineno)
    return lines


def test_no_module_makes_a_context_of_its_own_precision() -> None:
    found = []
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name not in ALLOWED:
                found += [f"{name}:{line}" for line in own_precisions(path.read_text())]
    assert found == [], "use finops.core.money.EXACT or exact_context()"


def test_the_check_sees_each_spelling() -> None:
    source = (
        "import decimal\nfrom decimal import Context, localcontext\n"
        "A = Context(prec=60)\nB = decimal.Context(prec=40, rounding='ROUND_DOWN')\n"
        "with localcontext(prec=28):\n    pass\nC = Context()\nwith localcontext(A):\n    pass\n"
    )
    assert own_precisions(source) == [3, 4, 5]


def test_exact_holds_a_product_of_two_amounts_and_a_sum_of_many() -> None:
    amount = Decimal("9999999999999999.999999999999")  # 28 digits, MONEY_PLACES 12
    product = exact_context(traps=[Inexact]).multiply(amount, amount)  # raises if it rounds
    assert Fraction(product) == Fraction(amount) ** 2
    assert len(product.as_tuple().digits) <= EXACT_DIGITS
    total = Decimal(0)
    for _ in range(1000):
        total = EXACT.add(total, amount)
    assert total == amount * 1000
