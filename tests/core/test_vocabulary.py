"""One vocabulary (issue 26 item 4): EffectiveCost is *amortised* and BilledCost *invoiced*, as
finance says; no identifier in product code is called ``billed`` (it meant either, and things
that are not money). scripts/vocabulary.py made the renames; this keeps them made.

Allowed: the API's deprecated ``billed``/``billed_cost`` fields (finops/api/serializers.py: their
names are the published schema), strings and comments (JSON keys of stored data, prose), and
the model field ``billed_cost`` (the FOCUS column BilledCost)."""

from __future__ import annotations

import importlib.util
import io
import re
import sys
import tokenize
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("finops", "billing_ingest")
SKIPPED_DIRS = {"migrations", "__pycache__"}
# The API field names are the schema; the serializers read `amortised`/`invoiced`.
ALLOWED = {"finops/api/serializers.py"}
BANNED = {"billed", "billed_total"}
TEMPLATE_BANNED = re.compile(r"\.billed(?!_cost)\b")


def banned_names_in(source: str, *, attributes_only: bool = False) -> list[int]:
    """Line numbers of identifiers with a banned name (`x.billed` only, if attributes_only)."""
    found = []
    previous: tokenize.TokenInfo | None = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        after_dot = previous is not None and previous.string == "."
        if token.type == tokenize.NAME and token.string in BANNED:
            if after_dot or not attributes_only:
                found.append(token.start[0])
        elif token.type == tokenize.STRING and re.match(r"[rRbB]?[fF]", token.string):
            fields = re.findall(r"\{[^{}]+\}", token.string)
            before = r"(?<=\.)" if attributes_only else r"(?<![\w'\"])"
            pattern = before + r"billed(_total)?(?![\w'\"])"
            if any(re.search(pattern, f) for f in fields):
                found.append(token.start[0])
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token
    return found


def _python(*bases: str) -> list[Path]:
    paths = []
    for base in bases:
        for path in sorted((ROOT / base).rglob("*.py")):
            if not set(path.relative_to(ROOT).parts) & SKIPPED_DIRS:
                paths.append(path)
    return paths


def test_no_product_identifier_is_called_billed() -> None:
    offenders = []
    for path in _python(*PRODUCT):
        relative = path.relative_to(ROOT).as_posix()
        if relative in ALLOWED:
            continue
        offenders += [f"{relative}:{n}" for n in banned_names_in(path.read_text())]
    assert offenders == [], (
        "say amortised (EffectiveCost) or invoiced (BilledCost), not billed; "
        "python scripts/vocabulary.py renames by its rules"
    )


def test_no_test_reads_an_attribute_called_billed() -> None:
    offenders = []
    for path in _python("tests"):
        if path == Path(__file__).resolve():
            continue
        lines = banned_names_in(path.read_text(), attributes_only=True)
        offenders += [f"{path.relative_to(ROOT).as_posix()}:{n}" for n in lines]
    assert offenders == []


def test_no_template_reads_billed() -> None:
    offenders = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if TEMPLATE_BANNED.search(line):
                offenders.append(f"{path.relative_to(ROOT).as_posix()}:{n}")
    assert offenders == []


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vocabulary", ROOT / "scripts/vocabulary.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["vocabulary"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_rename_script_has_nothing_left_to_do() -> None:
    script = _script()
    assert [p for p in script._files() if script.rewrite(p) is not None] == []


def test_the_check_sees_every_spelling() -> None:
    code = (
        "billed = 1\n"
        "x = row.billed\n"
        'y = f"{billed} and {row.billed:.2f}"\n'
        "z = d.billed_total()\n"
        'ok = item["billed"] + item.billed_cost  # billed\n'
        """no = f"{t['billed']} {t["billed_cost"]}"\n"""
        'fine = "billed"\n'
    )
    assert banned_names_in(code) == [1, 2, 3, 4]
    assert banned_names_in(code, attributes_only=True) == [2, 3, 4]


def test_the_script_renames_names_only_and_twice_is_once() -> None:
    script = _script()
    rules = [
        script.NameRule("x", "billed", "amortised"),
        script.NameRule("x", "billed_cost", "invoiced"),
    ]
    code = 'billed = row.billed_cost + t["billed"]  # billed\nf"{billed} {x.billed}"\n'
    once = script.rename_names(code, rules)
    assert once == (
        'amortised = row.invoiced + t["billed"]  # billed\nf"{amortised} {x.amortised}"\n'
    )
    assert script.rename_names(once, rules) == once
    attr = [script.NameRule("x", "billed", "amortised", attr_only=True)]
    assert script.rename_names("billed = r.billed\n", attr) == "billed = r.amortised\n"
