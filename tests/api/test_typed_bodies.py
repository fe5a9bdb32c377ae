"""The typed bodies (issue 26 item 5) say what the published schema says: the TypedDicts of the
run efficiency object have exactly the schema's properties, so neither can drift alone."""

from __future__ import annotations

from finops.api.run_efficiency import (
    EFFICIENCY_SCHEMA,
    HEADLINE_FIELDS,
    HEADLINE_SCHEMA,
    EfficiencyBody,
    HeadlineBody,
)


def test_efficiency_body_has_the_schema_properties() -> None:
    assert list(EfficiencyBody.__annotations__) == list(EFFICIENCY_SCHEMA["properties"])


def test_headline_body_has_the_headline_fields() -> None:
    assert tuple(HeadlineBody.__annotations__) == HEADLINE_FIELDS
    assert list(HEADLINE_SCHEMA["properties"]) == list(HEADLINE_FIELDS)
