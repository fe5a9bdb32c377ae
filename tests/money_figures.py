"""Money figures printed without their currency: a scan of a command's output (the project's
rule: every figure shows its currency). Shared by the command output tests."""

from __future__ import annotations

import re

# A number standing alone (not part of a word, a date, an address or a version such as p5.48).
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\w.])")
# Words after which a number is money, whatever its shape ("difference 0"; "of" but not "as of").
MONEY_WORDS = re.compile(
    r"\b(?:cost|costs|difference|actual|forecast|p10|p90|(?<!\bas )of|allocated|amortised|"
    r"invoiced|BilledCost|EffectiveCost|credit|saving|amount)\s*:?\s*$",
    re.IGNORECASE,
)
# Units that make a figure something other than money.
OTHER_UNITS = re.compile(r"\s*(?:%|kWh|s\b|ms\b|requests\b|tokens\b|rows\b|GPU-hours\b)")


def figures_without_currency(text: str, *, currencies: set[str], ignore: str = "$^") -> list[str]:
    """Every line with a money figure (a number with decimals, or any number after a money word)
    not followed by one of `currencies`; the text matching `ignore` (a version number, say) is
    left out."""
    after = re.compile(r"\s*(?:" + "|".join(sorted(currencies)) + r")\b")
    bad = []
    for line in text.splitlines():
        line = re.sub(ignore, "", line)
        for match in NUMBER.finditer(line):
            money = "." in match.group() or MONEY_WORDS.search(line[: match.start()])
            rest = line[match.end() :]
            if money and not after.match(rest) and not OTHER_UNITS.match(rest):
                bad.append(f"{match.group()!r} in {line.strip()!r}")
    return bad
