"""The run-cost FilterSet lives with RunCost (finops.attribution.filters); re-exported here so
the API's imports keep working."""

from finops.attribution.filters import (
    MONTH_FORMAT,
    MonthField,
    MonthFilter,
    RunCostFilterSet,
    month_format,
    month_parse,
)

__all__ = [
    "MONTH_FORMAT",
    "MonthField",
    "MonthFilter",
    "RunCostFilterSet",
    "month_format",
    "month_parse",
]
