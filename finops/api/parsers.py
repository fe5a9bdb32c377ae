"""The API's JSON parser: DRF's, with the nesting bounded (FINOPS_MAX_JSON_DEPTH).

json.loads recurses once per level and ends in a RecursionError some thousand levels down,
which DRF does not catch: a body of 5,000 nested arrays answered 500. Here a body nested deeper
than the bound is a 400 before it is decoded, on every endpoint that takes JSON.
"""

from __future__ import annotations

import codecs
import io
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from billing_ingest.parsers.bounds import json_depth_exceeds, max_json_depth


class BoundedJSONParser(JSONParser):
    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        context = parser_context or {}
        encoding = context.get("encoding", settings.DEFAULT_CHARSET)
        body = stream.read()
        try:
            text = codecs.decode(body, encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        limit = max_json_depth()
        if json_depth_exceeds(text, limit):
            raise ParseError(
                f"JSON parse error - nested deeper than {limit} levels (FINOPS_MAX_JSON_DEPTH)"
            )
        try:
            return super().parse(io.BytesIO(body), media_type, parser_context)
        except RecursionError:
            raise ParseError(
                f"JSON parse error - nested deeper than {limit} levels (FINOPS_MAX_JSON_DEPTH)"
            ) from None
