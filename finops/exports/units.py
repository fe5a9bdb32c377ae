"""Provider units spelled in the FOCUS 1.2 Unit Format (the "Unit Format" attribute).

FOCUS writes a unit as one of: `<units>` ("GB", "Hours", "Requests"), `<unit>-<plural time
unit>` ("GB-Hours", "GiB-Months"), `<units>/<singular time unit>` ("OCPU/Hour"), `<quantity>
<units>` ("1000 Requests") or `<units>/<interval> <plural time units>`. Data sizes use the
standard abbreviations (B, KB, ..., KiB, ...; b for bits), time units their capitalised names,
plural where a quantity of them is meant.

Providers write the same things many ways: AWS "Hrs", "GB-Mo" and "Request", GCP "seconds",
"gibibyte", "gibibyte month" and "requests", Azure "1 Hour", "1 GB/Month", "10K" and "1/Month",
Oracle "GB Hours" and "OCPU Per Hour", OTel-style "GiBy.mo". Each is mapped where its meaning is
unambiguous. A count unit is the provider's own word: FOCUS's recommended names (Requests,
Counts, Units, Tokens, ...) are spelled as FOCUS spells them, singular or plural, another
lower-case word is capitalised, and anything else (vCPU, IOs, Transactions) is kept as written.
"""

from __future__ import annotations

import re

# Data sizes: FOCUS abbreviation for every spelling met in exports (compared lower-cased, so
# only spellings that are unambiguous ignoring case are listed: "gb" is never gigabit in a bill).
_SIZE_WORDS = {
    "b": "B",
    "by": "B",
    "byte": "B",
    "bytes": "B",
    "bit": "b",
    "bits": "b",
}
for _prefix, _decimal, _binary in (
    ("k", "kilo", "kibi"),
    ("m", "mega", "mebi"),
    ("g", "giga", "gibi"),
    ("t", "tera", "tebi"),
    ("p", "peta", "pebi"),
    ("e", "exa", "exbi"),
):
    _upper = _prefix.upper()
    _SIZE_WORDS.update(
        {
            f"{_prefix}b": f"{_upper}B",
            f"{_decimal}byte": f"{_upper}B",
            f"{_decimal}bytes": f"{_upper}B",
            f"{_prefix}ib": f"{_upper}iB",
            f"{_prefix}iby": f"{_upper}iB",
            f"{_binary}byte": f"{_upper}iB",
            f"{_binary}bytes": f"{_upper}iB",
            f"{_decimal}bit": f"{_upper}b",
            f"{_decimal}bits": f"{_upper}b",
            f"{_binary}bit": f"{_upper}ib",
            f"{_binary}bits": f"{_upper}ib",
        }
    )
# Bit abbreviations differ from byte ones only by case: kept when written exactly so.
_EXACT_SIZES = frozenset(
    {"b", "B"}
    | {f"{p}{u}" for p in "KMGTPE" for u in ("b", "B")}
    | {f"{p}i{u}" for p in "KMGTPE" for u in ("b", "B")}
)

# Time units: spelling (lower-cased) -> (singular, plural).
_TIME_WORDS: dict[str, tuple[str, str]] = {}
for _singular, _spellings in (
    ("Second", ("s", "sec", "secs", "second", "seconds")),
    ("Minute", ("min", "mins", "minute", "minutes")),
    ("Hour", ("h", "hr", "hrs", "hour", "hours")),
    ("Day", ("d", "day", "days")),
    ("Month", ("mo", "mos", "month", "months")),
    ("Year", ("yr", "yrs", "year", "years")),
):
    for _spelling in _spellings:
        _TIME_WORDS[_spelling] = (_singular, _singular + "s")

_TIME_ALTERNATION = "|".join(sorted(_TIME_WORDS, key=len, reverse=True))
# "<n> " before the unit; Azure writes thousands and millions as 10K, 1M.
_QUANTITY_RE = re.compile(r"^(?P<number>\d+)(?P<scale>[KM]?)\s+(?P<rest>\S.*)$")
_RATE_RE = re.compile(
    r"^(?P<base>.+?)\s*(?:/|\s+per\s+)\s*(?P<time>" + _TIME_ALTERNATION + r")$", re.I
)
_PRODUCT_RE = re.compile(r"^(?P<base>.+?)[-. ](?P<time>" + _TIME_ALTERNATION + r")$", re.I)
# "Lambda-GB-Seconds": a product name before a data size is not part of the unit.
_NAMED_SIZE_RE = re.compile(r"^[A-Za-z]+-(?P<size>[A-Za-z]+)$")
_BARE_QUANTITY_RE = re.compile(r"^(?P<number>\d+)(?P<scale>[KM]?)$")
_SPACED_RATE_RE = re.compile(r"^(\d+[KM]?)\s+/")
_SCALES = {"": 1, "K": 1000, "M": 1_000_000}
# What a charge without a named unit is counted in (a lump sum, Azure's bare "10K").
UNNAMED_UNIT = "Units"

# FOCUS's recommended count-based unit names, (singular, plural), by any spelling providers use
# (compared lower-cased): GCP writes "requests" and "count", AWS "Request" and "API Request".
_COUNT_WORDS: dict[str, tuple[str, str]] = {}
for _singular in ("Count", "Unit", "Request", "Token", "Connection", "Certificate", "Domain"):
    _COUNT_WORDS[_singular.lower()] = (_singular, _singular + "s")
    _COUNT_WORDS[_singular.lower() + "s"] = (_singular, _singular + "s")
_COUNT_WORDS["core"] = _COUNT_WORDS["cores"] = ("Core", "Cores")


def _size(word: str) -> str | None:
    if word in _EXACT_SIZES:
        return word
    return _SIZE_WORDS.get(word.lower())


def _count(text: str, *, plural: bool) -> str:
    """A count unit as FOCUS names it: a recommended name (alone or as the last word, "API
    Request" -> "API Requests") in its singular or plural form, another lower-case word
    capitalised ("operations" -> "Operations"); anything else as written ("vCPU", "IOs")."""
    *words, last = text.split(" ")
    known = _COUNT_WORDS.get(last.lower())
    if known is not None:
        return " ".join([*words, known[1] if plural else known[0]])
    if text.islower() and text.isalpha():
        return text.capitalize()
    return text


def _base(text: str, *, plural: bool = True) -> str:
    """A unit without time: a data size in its abbreviation, else a count (see _count), plural
    where a quantity of it is meant and singular before a time ("Request-Hours")."""
    text = text.strip()
    size = _size(text)
    if size is not None:
        return size
    named = _NAMED_SIZE_RE.match(text)
    if named is not None and _size(named["size"]) is not None:
        return _size(named["size"]) or text
    return _count(text, plural=plural)


def _time(word: str) -> tuple[str, str]:
    return _TIME_WORDS[word.lower()]


def _quantity(match: re.Match[str]) -> int:
    return int(match["number"]) * _SCALES[match["scale"]]


def focus_unit(unit: str) -> str:
    """`unit` in FOCUS Unit Format where its meaning is unambiguous ("GB-Mo" -> "GB-Months",
    "gibibyte month" -> "GiB-Months", "1 GB/Month" -> "GB-Months", "seconds" -> "Seconds",
    "1 Hour" -> "Hours", "10K" -> "10000 Units", "1/Month" -> "Units/Month", "requests" ->
    "Requests", "OCPU Per Hour" -> "OCPU/Hour"...); anything else unchanged."""
    # EA's "1 /Month" is "1/Month".
    text = _SPACED_RATE_RE.sub(r"\1/", " ".join(unit.split()))
    if not text:
        return text
    bare = _BARE_QUANTITY_RE.match(text)
    if bare is not None:
        # Azure's bare "10K" / "1M": that many of the meter's (unnamed) units.
        return f"{_quantity(bare)} {UNNAMED_UNIT}"
    quantity = 1
    numbered = _QUANTITY_RE.match(text)
    if numbered is not None:
        quantity = _quantity(numbered)
        text = numbered["rest"]
    unit_text, per = _unit(text, per_quantity=numbered is not None)
    quantity *= per
    if quantity == 1:
        return unit_text
    return f"{quantity} {unit_text}"


def _unit(text: str, *, per_quantity: bool) -> tuple[str, int]:
    """(the unit in FOCUS format, a unit quantity it carried: Azure's "10K/Month" is 10000
    Units/Month)."""
    if text.lower() in _TIME_WORDS:
        return _time(text)[1], 1  # "seconds", "Hrs", "1 Hour" -> plural time
    rate = _RATE_RE.match(text)
    if rate is not None:
        singular, plural = _time(rate["time"])
        counted = _BARE_QUANTITY_RE.match(rate["base"].strip())
        if counted is not None:
            # Azure's "1/Month", "10K/Hour": so many (unnamed) units per month or hour.
            return f"{UNNAMED_UNIT}/{singular}", _quantity(counted)
        base = _base(rate["base"])
        if per_quantity and _size(base) is not None:
            # Azure's "1 GB/Month" is the price of a GB held for a month: GB-Months.
            return f"{base}-{plural}", 1
        return f"{base}/{singular}", 1
    product = _PRODUCT_RE.match(text)
    if product is not None and not product["base"].strip().isdigit():
        return f"{_base(product['base'], plural=False)}-{_time(product['time'])[1]}", 1
    return _base(text), 1
