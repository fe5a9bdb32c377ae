"""The API's input fields: strict JSON types, one definition for every serializer.

DRF's own fields are lenient in ways a money API must not be: its BooleanField takes "yes",
"on", "1" and 0; its IntegerField takes "12", 12.0 and "١٢"; its DecimalField takes 3.5 as a
float and any Unicode digit ("٣" is 3). The API takes JSON bodies only (settings: JSONParser),
so a value has a JSON type and these fields insist on it:

- StrictBooleanField: the JSON literals true and false, nothing else (no strings, no numbers);
- StrictIntegerField: a JSON integer (not a boolean, not a float, not a string);
- StrictCharField / StrictEmailField: a JSON string (DRF turns 12 into "12");
- StrictDateField: YYYY-MM-DD in ASCII digits (RFC 3339 full-date, the schema's format
  "date"), where Python also takes "20250901" and "2025-W36-1", and Django "2025-9-1";
- AsciiDecimalField: a JSON string of ASCII digits, `-?[0-9]+(.[0-9]+)?` (no exponent, no
  spaces, no other script's digits), within the field's max_digits and decimal_places.

tests/api/test_api_strict_input.py checks that every writable field of every API serializer is one
of these (or a text, choice, list or date field), and that the schema's patterns say the same.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator, RegexValidator
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers

# Text without a NUL character (PostgreSQL cannot store one; DRF refuses it).
NO_NUL = r"^[^\x00]*$"
_NO_NUL_VALIDATOR = RegexValidator(NO_NUL, message="Null characters are not allowed.")
_NO_NUL_NONEMPTY_VALIDATOR = RegexValidator(
    r"^[^\x00]+$", message="Null characters are not allowed."
)
_ASCII_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
DATE_MESSAGE = "Must be a date as YYYY-MM-DD."


def iso_date_parse(text: str) -> date:
    """A YYYY-MM-DD date (RFC 3339 full-date); ValueError for anything else."""
    if _ISO_DATE.fullmatch(text) is None:
        raise ValueError(DATE_MESSAGE)
    return date.fromisoformat(text)


class StrictDateField(serializers.DateField):
    """A date as YYYY-MM-DD, the schema's format "date", and nothing else."""

    default_error_messages = {"invalid": DATE_MESSAGE}

    def to_internal_value(self, value: Any) -> date:
        if not isinstance(value, str):
            self.fail("invalid")
        try:
            return iso_date_parse(value)
        except ValueError:
            self.fail("invalid")
        raise AssertionError("unreachable")  # pragma: no cover (fail raises)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean: `true` or `false`. Strings ("true", "on", "maybe"), numbers and lists are
    refused with "Must be true or false.", though DRF (and Python's bool()) would take them."""

    default_error_messages = {"invalid": "Must be true or false (a JSON boolean)."}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)
        raise AssertionError("unreachable")  # pragma: no cover (fail raises)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer: not true/false, not 12.0, not "12", not "١٢"."""

    default_error_messages = {"invalid": "Must be a whole number (a JSON integer)."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        value: int = super().to_internal_value(data)
        return value


class StrictCharField(serializers.CharField):
    """A JSON string: a number, boolean, list or object is refused, not turned into text. One
    that may not be blank says minLength 1 in the schema."""

    default_error_messages = {"invalid": "Must be a string."}

    def __init__(self, **kwargs: Any) -> None:
        if not kwargs.get("allow_blank", False) and kwargs.get("min_length") is None:
            kwargs["min_length"] = 1
        super().__init__(**kwargs)
        # DRF refuses a NUL character; a pattern of the same rule puts it in the schema (a
        # field with a pattern of its own excludes NUL in it).
        # A blank-allowed field's pattern excludes "" (DRF takes "" before any validator, and
        # drf-spectacular documents it as oneOf [pattern, maxLength 0]: those must not overlap).
        if not any(isinstance(v, RegexValidator) for v in self.validators):
            no_nul = _NO_NUL_NONEMPTY_VALIDATOR if self.allow_blank else _NO_NUL_VALIDATOR
            self.validators = [
                no_nul if isinstance(v, ProhibitNullCharactersValidator) else v
                for v in self.validators
            ]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        value: str = super().to_internal_value(data)
        return value


class StrictEmailField(serializers.EmailField):
    """An email address, as a JSON string."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        value: str = super().to_internal_value(data)
        return value


def decimal_pattern(*, max_digits: int | None, decimal_places: int | None) -> str:
    """The JSON-schema pattern of an AsciiDecimalField: ASCII digits only ([0-9], never \\d,
    which matches every script's digits in Python's and a generator's regexes)."""
    whole = "[0-9]+"
    if max_digits is not None:
        whole_digits = max_digits - (decimal_places or 0)
        whole = f"[0-9]{{1,{max(whole_digits, 1)}}}"
    if decimal_places == 0:
        return f"^-?{whole}$"
    places = "[0-9]+" if decimal_places is None else f"[0-9]{{1,{decimal_places}}}"
    return rf"^-?{whole}(\.{places})?$"


class AsciiDecimalField(serializers.DecimalField):
    """A decimal written as a JSON string of ASCII digits ("1950.00", "-3", "0.5"). A JSON
    number (a float is inexact), an exponent ("1e3"), "NaN", spaces or other scripts' digits
    ("٣") are refused; then DRF's checks (max_digits, decimal_places, min/max) apply."""

    default_error_messages = {
        "invalid": 'Must be a decimal string of ASCII digits, e.g. "1950.00".',
    }

    def __init__(self, *args: Any, schema_pattern: str | None = None, **kwargs: Any) -> None:
        # The schema's pattern where the digits are checked elsewhere (default: from
        # max_digits and decimal_places).
        self.schema_pattern = schema_pattern
        super().__init__(*args, **kwargs)

    def to_internal_value(self, data: Any) -> Decimal:
        if not isinstance(data, str) or _ASCII_DECIMAL.fullmatch(data) is None:
            self.fail("invalid")
        value: Decimal = super().to_internal_value(data)
        return value


class AsciiDecimalFieldExtension(OpenApiSerializerFieldExtension):
    """The schema of an AsciiDecimalField: a string with the pattern the field enforces."""

    target_class = "finops.api.fields.AsciiDecimalField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        field = self.target
        schema: dict[str, Any] = build_basic_type(OpenApiTypes.DECIMAL) or {}
        schema.update(
            type="string",
            format="decimal",
            pattern=field.schema_pattern
            or decimal_pattern(max_digits=field.max_digits, decimal_places=field.decimal_places),
        )
        return schema
