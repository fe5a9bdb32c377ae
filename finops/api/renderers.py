"""The API's JSON renderer: a Decimal that reaches it unserialized (a report built as plain
dicts, e.g. a run's pricing) is written as a decimal string without exponent, like every
DecimalField (COERCE_DECIMAL_TO_STRING), not as DRF's float (0.00001 became 1e-05)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder

from finops.core.money import decimal_text


class DecimalTextEncoder(JSONEncoder):
    def default(self, obj: Any) -> Any:
        if isinstance(obj, Decimal):
            return decimal_text(obj)
        return super().default(obj)


class JSONRenderer(renderers.JSONRenderer):
    encoder_class = DecimalTextEncoder

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Any = None,
    ) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            # A lone surrogate echoed back in an error message (a fuzzed body) has no UTF-8
            # form: write the body with JSON's \uXXXX escapes instead of answering 500.
            return _AsciiJSONRenderer().render(data, accepted_media_type, renderer_context)


class _AsciiJSONRenderer(renderers.JSONRenderer):
    encoder_class = DecimalTextEncoder
    ensure_ascii = True
