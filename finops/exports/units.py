"""Provider units spelled in the FOCUS 1.2 Unit Format (the "Unit Format" attribute).

FOCUS writes a unit as one of: `<units>` ("GB", "Hours", "Requests"), `<unit>-<plural time
unit>` ("GB-Hours", "GiB-Months"), `<units>/<singular time unit>` ("OCPU/Hour"), `<quantity>
<units>` ("1000 Requests") or `<units>/<interval> <plural time units>`. Data sizes use the
standard abbreviations (B, KB, ..., KiB, ...; b for bits), time units their capitalised names,
plural where a quantity of them is meant.

Providers write the same things many ways: AWS "Hrs" and "GB-Mo", GCP "seconds", "gibibyte" and
"gibibyte month", Azure "1 Hour", "1 GB/Month" and "10K", OTel-style "GiBy.mo". Each is mapped
where its meaning is unambiguous; a count unit (Requests, vCPU, Transactions) is the provider's
own word and is kept as written.
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
_SCALES = {"": 1, "K": 1000, "M": 1_000_000}
# What a charge without a named unit is counted in (a lump sum, Azure's bare "10K").
UNNAMED_UNIT = "Units"


def _size(word: str) -> str | None:
    if word in _EXACT_SIZES:
        return word
    return _SIZE_WORDS.get(word.lower())


def _base(text: str) -> str:
    """A unit without time: a data size in its abbreviation, else the provider's word."""
    text = text.strip()
    size = _size(text)
    if size is not None:
        return size
    named = _NAMED_SIZE_RE.match(text)
    if named is not None and _size(named["size"]) is not None:
        return _size(named["size"]) or text
    return text


def _time(word: str) -> tuple[str, str]:
    return _TIME_WORDS[word.lower()]


def focus_unit(unit: str) -> str:
    """`unit` in FOCUS Unit Format where its meaning is unambiguous ("GB-Mo" -> "GB-Months",
    "gibibyte month" -> "GiB-Months", "1 GB/Month" -> "GB-Months", "seconds" -> "Seconds",
    "1 Hour" -> "Hours", "10K" -> "10000 Units"...); anything else unchanged."""
    text = " ".join(unit.split())
    if not text:
        return text
    bare = _BARE_QUANTITY_RE.match(text)
    if bare is not None:
        # Azure's bare "10K" / "1M": that many of the meter's (unnamed) units.
        return f"{int(bare['number']) * _SCALES[bare['scale']]} {UNNAMED_UNIT}"
    quantity = 1
    numbered = _QUANTITY_RE.match(text)
    if numbered is not None:
        quantity = int(numbered["number"]) * _SCALES[numbered["scale"]]
        text = numbered["rest"]
    unit_text = _unit(text, per_quantity=numbered is not None)
    if quantity == 1:
        return unit_text
    return f"{quantity} {unit_text}"


def _unit(text: str, *, per_quantity: bool) -> str:
    if text.lower() in _TIME_WORDS:
        return _time(text)[1]  # "seconds", "Hrs", "1 Hour" -> plural time
    rate = _RATE_RE.match(text)
    if rate is not None:
        base = _base(rate["base"])
        singular, plural = _time(rate["time"])
        if per_quantity and _size(base) is not None:
            # Azure's "1 GB/Month" is the price of a GB held for a month: GB-Months.
            return f"{base}-{plural}"
        return f"{base}/{singular}"
    product = _PRODUCT_RE.match(text)
    if product is not None and not product["base"].strip().isdigit():
        return f"{_base(product['base'])}-{_time(product['time'])[1]}"
    return _base(text)
