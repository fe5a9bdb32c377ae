"""The run-cost FilterSet lives with RunCost (finops.attribution.filters); re-exported here so
the API's imports keep working."""

from finops.attribution.filters import MonthField, MonthFilter, RunCostFilterSet

__all__ = ["MonthField", "MonthFilter", "RunCostFilterSet"]
