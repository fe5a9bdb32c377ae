"""The run detail of `GET /api/v1/runs/{id}/`: the rollup with its `efficiency`, `waste` and
`attempts`, and `energy` (DESIGN section 9), each object from its own module."""

from __future__ import annotations

from finops.api.run_energy import RunCostEnergyDetailSerializer
from finops.api.run_waste import RunWasteDetailSerializer
from finops.api.serializers import RunCostDetailSerializer


class RunDetailSerializer(RunWasteDetailSerializer, RunCostEnergyDetailSerializer):
    class Meta(RunCostDetailSerializer.Meta):
        fields = [*RunCostDetailSerializer.Meta.fields, "waste", "attempts", "energy"]
