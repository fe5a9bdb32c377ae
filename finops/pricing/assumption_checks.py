"""The bounds of every pricing assumption and the checks of its structured (JSON) values (issue 27).

One table (BOUNDS) gives each number its range; the model's validators, the settings form's
inputs (min / max) and the API's errors all come from it, so the form and the API refuse the
same values with the same message, naming the setting. Pure: no ORM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator

RESERVED_TERMS = ("1y_no_upfront", "1y_all_upfront", "3y_no_upfront", "3y_all_upfront")
# How a term is named for people ("1y_no_upfront" is the API's key).
TERM_LABELS = {
    "1y_no_upfront": "1 year, no upfront",
    "1y_all_upfront": "1 year, all upfront",
    "3y_no_upfront": "3 years, no upfront",
    "3y_all_upfront": "3 years, all upfront",
}
CURRENCY_CODE = RegexValidator(
    re.compile(r"^[A-Z]{3}\Z"), message="Currency must be an ISO 4217 code such as USD."
)
KEY_LENGTH = 64


@dataclass(frozen=True)
class Bound:
    label: str
    low: Decimal
    high: Decimal

    @property
    def message(self) -> str:
        return f"{self.label} must be between {self.low} and {self.high}."

    def validators(self) -> list[Any]:
        # Whole limits as int: the OpenAPI schema (drf-spectacular) carries them as numbers.
        def limit(value: Decimal) -> int | Decimal:
            return int(value) if value == value.to_integral_value() else value

        return [
            MinValueValidator(limit(self.low), message=self.message),
            MaxValueValidator(limit(self.high), message=self.message),
        ]


def _bound(label: str, low: str | int, high: str | int) -> Bound:
    return Bound(label, Decimal(low), Decimal(high))


BOUNDS: dict[str, Bound] = {
    "spot_price_ratio": _bound("Spot price ratio", 0, 1),
    "checkpoint_interval_minutes": _bound("Checkpoint interval (minutes)", 0, 1440),
    "restart_minutes": _bound("Restart (minutes)", 0, 1440),
    "utilisation_window_days": _bound("Utilisation window (days)", 1, 366),
    "recommendation_percentile": _bound("Recommendation percentile", 1, 99),
    "node_capex": _bound("Node capex", 0, 100_000_000),
    "amortisation_months": _bound("Amortisation (months)", 1, 120),
    "gpus_per_node": _bound("GPUs per node", 1, 72),
    "watts_per_gpu": _bound("Watts per GPU", 0, 5000),
    "pue": _bound("PUE (facility power / IT power)", "1.0", "3.0"),
    "price_per_kwh": _bound("Electricity price", 0, 10),
    "rack_per_node_month": _bound("Rack per node-month", 0, 1_000_000),
    "network_per_node_month": _bound("Network per node-month", 0, 1_000_000),
    "staff_per_node_month": _bound("Staff per node-month", 0, 1_000_000),
}
# The values inside the structured settings.
SHARE = _bound("A share", 0, 1)
NOTICE = _bound("A notice", 0, 3600)


def number(value: Any) -> Decimal | None:
    """A finite decimal from a JSON number or decimal string; None for anything else (bools,
    NaN, infinities, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return None
    try:
        parsed = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    return parsed if parsed.is_finite() else None


def _keyed(value: Any, label: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"{label}: entries of name = value, not {value!r}.")
    if not value:
        raise ValidationError(f"{label}: give at least one entry.")
    for key in value:
        if not isinstance(key, str) or not key.strip() or len(key) > KEY_LENGTH:
            raise ValidationError(f"{label}: {key!r} is not a name (1 to {KEY_LENGTH} characters).")
    return value


def shares_check(value: Any, *, label: str, keys: tuple[str, ...] = ()) -> None:
    """A mapping name -> share between 0 and 1 (all of `keys` present, when given)."""
    entries = _keyed(value, label)
    missing = [key for key in keys if key not in entries]
    if missing:
        raise ValidationError(f"{label}: missing {', '.join(missing)}.")
    extra = [key for key in entries if keys and key not in keys]
    if extra:
        raise ValidationError(f"{label}: unknown {', '.join(map(str, extra))}.")
    for key, share in entries.items():
        parsed = number(share)
        if parsed is None or not SHARE.low <= parsed <= SHARE.high:
            raise ValidationError(f"{label}: {key} must be a number between 0 and 1.")


def notices_check(value: Any, *, label: str) -> None:
    """A mapping provider -> whole seconds between 0 and 3600."""
    for key, seconds in _keyed(value, label).items():
        parsed = number(seconds)
        if (
            parsed is None
            or parsed != parsed.to_integral_value()
            or not (NOTICE.low <= parsed <= NOTICE.high)
        ):
            raise ValidationError(f"{label}: {key} must be whole seconds between 0 and 3600.")


def family_bands_check(value: Any, *, label: str, bands: Any) -> None:
    """A mapping family (or family:region) -> one of the interruption bands (may be empty)."""
    if isinstance(value, Mapping) and not value:
        return
    known = set(bands) if isinstance(bands, Mapping) else set()
    for family, band in _keyed(value, label).items():
        if not isinstance(band, str) or band not in known:
            names = ", ".join(sorted(map(str, known)))
            raise ValidationError(f"{label}: {family} names band {band!r}; the bands are {names}.")


def structured_errors(
    *,
    interruption_bands: Any,
    family_bands: Any,
    default_band: Any,
    notice_seconds: Any,
    reserved_ratios: Any,
) -> dict[str, list[str]]:
    """Every structured setting's problem, keyed by the setting (empty when all are good)."""
    errors: dict[str, list[str]] = {}
    checks = {
        "interruption_bands": lambda: shares_check(interruption_bands, label="Interruption bands"),
        "notice_seconds": lambda: notices_check(notice_seconds, label="Interruption notice"),
        "reserved_ratios": lambda: shares_check(
            reserved_ratios, label="Committed price ratios", keys=RESERVED_TERMS
        ),
    }
    for name, check in checks.items():
        try:
            check()
        except ValidationError as exc:
            errors[name] = exc.messages
    if "interruption_bands" not in errors:
        if default_band not in interruption_bands:
            names = ", ".join(sorted(map(str, interruption_bands)))
            errors["default_band"] = [f"Default band must be one of the bands: {names}."]
        try:
            family_bands_check(family_bands, label="Family bands", bands=interruption_bands)
        except ValidationError as exc:
            errors["family_bands"] = exc.messages
    return errors
