"""One vocabulary (issue 26 item 4): rename the names that say "billed" for EffectiveCost.

Finance says *amortised* for EffectiveCost and *invoiced* for BilledCost; the code said
``billed`` for both (and for things that are not money at all). This script renames Python
identifiers (NAME tokens only: never strings, comments, model fields, API field names, JSON or
CSV keys) and a few template attributes, per file, by the rules below. It is idempotent: a
second run changes nothing, and it can be re-run on a tree that received new code using the
old names (the lead runs it after each merge).

Usage (from the repository root):
    python scripts/vocabulary.py           # rewrite, print what changed
    python scripts/vocabulary.py --check   # exit 1 if anything would change

Kept on purpose: the API's deprecated ``billed``/``billed_cost`` fields (their names are the
schema; their ``source`` now reads ``amortised``/``invoiced``), the JSON keys ``"billed"`` of
stored batch totals and export task results (data already written), and the model field
``billed_cost`` (BilledCost, a FOCUS column name). tests/core/test_vocabulary.py bans the old
names so they do not come back.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class NameRule:
    """Rename identifier `old` to `new` in files matching `glob`; attr_only: only `x.old`."""

    glob: str
    old: str
    new: str
    attr_only: bool = False


@dataclass(frozen=True)
class TextRule:
    """Replace the exact text `old` by `new` in files matching `glob` (new never contains old)."""

    glob: str
    old: str
    new: str


# The API field names are the schema: the serializers keep `billed`, only their sources move.
NAME_SKIPPED = ("finops/api/serializers.py",)

NAME_RULES: tuple[NameRule, ...] = (
    # The reconciliation row: EffectiveCost is amortised, BilledCost invoiced.
    NameRule("finops/attribution/selectors/reconciliation.py", "billed", "amortised"),
    NameRule("finops/attribution/selectors/reconciliation.py", "billed_cost", "invoiced"),
    NameRule("tests/*", "billed", "amortised", attr_only=True),
    # FOCUS export result: the sum of BilledCost per currency.
    NameRule("finops/exports/*", "billed", "invoiced"),
    # Demo data: BilledCost of the generated bills.
    NameRule("finops/demo/*", "billed", "invoiced"),
    NameRule("finops/demo/*", "billed_total", "invoiced_total"),
    NameRule("tests/*", "billed_total", "invoiced_total"),
    # Parsers: the provider's unblended / billed cost column is BilledCost.
    NameRule("billing_ingest/parsers/*", "billed", "invoiced"),
    # Not money: the bill's column sums, months with a delivery, hours a node is up.
    NameRule("finops/attribution/ledger/writer.py", "billed", "bill_sums"),
    NameRule("finops/metrics/selectors.py", "billed", "delivered"),
    NameRule("finops/pricing/recommendation_rules.py", "billed", "up_hours"),
)

TEXT_RULES: tuple[TextRule, ...] = (
    TextRule("finops/api/serializers.py", 'source="billed",', 'source="amortised",'),
    TextRule("finops/api/serializers.py", 'source="billed_cost",', 'source="invoiced",'),
    TextRule(
        "finops/api/serializers.py", 'source="figures.billed",', 'source="figures.amortised",'
    ),
    TextRule(
        "finops/api/serializers.py", 'source="figures.billed_cost",', 'source="figures.invoiced",'
    ),
    TextRule(
        "finops/api/serializers.py",
        'billed = deprecated_money(help_text="',
        'billed = deprecated_money(source="amortised", help_text="',
    ),
    TextRule(
        "finops/api/serializers.py",
        'billed_cost = deprecated_money(help_text="',
        'billed_cost = deprecated_money(source="invoiced", help_text="',
    ),
    TextRule("templates/*reconciliation*.html", ".billed|", ".amortised|"),
    TextRule("templates/*reconciliation*.html", ".billed_cost|", ".invoiced|"),
)

SKIPPED_DIRS = {".venv", ".git", "node_modules", "migrations", "__pycache__", "staticfiles"}


def rename_names(source: str, rules: list[NameRule]) -> str:
    """`source` with the rules' identifiers renamed (NAME tokens only)."""
    if not rules:
        return source
    edits: list[tuple[int, int, int, str]] = []  # line, col, length, new
    previous: tokenize.TokenInfo | None = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME:
            after_dot = (
                previous is not None and previous.type == tokenize.OP and (previous.string == ".")
            )
            for rule in rules:
                if token.string == rule.old and (after_dot or not rule.attr_only):
                    edits.append((token.start[0], token.start[1], len(rule.old), rule.new))
                    break
        elif token.type == tokenize.STRING and _is_fstring(token.string):
            renamed = _rename_in_fstring(token.string, rules)
            if renamed != token.string:
                edits.append((token.start[0], token.start[1], len(token.string), renamed))
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token
    if not edits:
        return source
    lines = source.splitlines(keepends=True)
    for line, col, length, new in sorted(edits, reverse=True):
        text = lines[line - 1]
        lines[line - 1] = text[:col] + new + text[col + length :]
    return "".join(lines)


def _is_fstring(text: str) -> bool:
    prefix = re.match(r"[A-Za-z]*", text)
    return prefix is not None and "f" in prefix.group(0).lower()


def _rename_in_fstring(text: str, rules: list[NameRule]) -> str:
    """Python < 3.12 tokenizes an f-string as one STRING: rename inside its {fields}."""

    def field(match: re.Match[str]) -> str:
        inner = match.group(0)
        for rule in rules:
            before = r"(?<=\.)" if rule.attr_only else r"(?<![\w'\"])"
            pattern = before + re.escape(rule.old) + r"(?![\w'\"])"
            inner = re.sub(pattern, rule.new, inner)
        return inner

    return re.sub(r"(?<!\{)\{[^{}]+\}", field, text)


def replace_texts(source: str, rules: list[TextRule]) -> str:
    for rule in rules:
        source = source.replace(rule.old, rule.new)
    return source


def _files() -> list[Path]:
    found = []
    for base in ("finops", "billing_ingest", "tests", "templates"):
        for path in sorted((ROOT / base).rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if path.is_file() and not parts & SKIPPED_DIRS and path.suffix in {".py", ".html"}:
                found.append(path)
    return found


def rewrite(path: Path) -> str | None:
    """The file's new text, or None when the rules change nothing."""
    relative = path.relative_to(ROOT).as_posix()
    text = path.read_text()
    new = replace_texts(text, [r for r in TEXT_RULES if fnmatch(relative, r.glob)])
    if path.suffix == ".py" and relative not in NAME_SKIPPED:
        new = rename_names(new, [r for r in NAME_RULES if fnmatch(relative, r.glob)])
    return None if new == text else new


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if due")
    args = parser.parse_args()
    changed = []
    for path in _files():
        new = rewrite(path)
        if new is None:
            continue
        changed.append(path.relative_to(ROOT).as_posix())
        if not args.check:
            path.write_text(new)
    for name in changed:
        print(("would rewrite " if args.check else "rewrote ") + name)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
