"""The `energy` object of a run on `GET /api/v1/runs/{id}/` and the per team and month sums on
`GET /api/v1/energy/?month=YYYY-MM[&team=slug]` (DESIGN section 9; finops/energy/selectors.py).

kWh and kg CO2e are decimal strings with 6 places; `estimated` is true when any part of the
energy is an estimate from the GPU model's power rather than a DCGM measurement.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from finops.api.run_efficiency import run_key
from finops.api.schema import month_parameter, team_parameter
from finops.api.serializers import PricingQuerySerializer, RunCostDetailSerializer
from finops.api.teams import teams_asked
from finops.attribution.models import RunCost
from finops.core.months import month_parse
from finops.energy.selectors import RunEnergy, TeamEnergy, run_energy, team_month_energy
from finops.org.permissions import user_is_finance

_DECIMAL = {"type": "string", "format": "decimal"}
_NULLABLE_DECIMAL = {**_DECIMAL, "nullable": True}
ENERGY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "nullable": True,
    "description": "GPU and facility energy (kWh) and location-based emissions (kg CO2e) of "
    "the run over every attempt; null when the run has no GPU time.",
    "properties": {
        "gpu_kwh": _DECIMAL,
        "measured_kwh": _DECIMAL,
        "estimated_kwh": _DECIMAL,
        "pue": _NULLABLE_DECIMAL,
        "pue_source": {"type": "string"},
        "facility_kwh": _DECIMAL,
        "grid_g_per_kwh": _NULLABLE_DECIMAL,
        "grid_source": {"type": "string"},
        "grid_year": {"type": "string"},
        "co2e_kg": {**_NULLABLE_DECIMAL, "description": "of the energy with a grid intensity"},
        "co2e_missing_kwh": {**_DECIMAL, "description": "facility kWh with no grid intensity"},
        "estimated": {"type": "boolean"},
        "power_source": {"type": "string"},
        "parts": {"type": "array", "items": {"type": "object"}},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}


def _text(value: Any) -> str | None:
    return None if value is None else f"{value:f}"


def energy_body(e: RunEnergy | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "gpu_kwh": _text(e.gpu_kwh),
        "measured_kwh": _text(e.measured_kwh),
        "estimated_kwh": _text(e.estimated_kwh),
        "pue": _text(e.pue),
        "pue_source": e.pue_source,
        "facility_kwh": _text(e.facility_kwh),
        "grid_g_per_kwh": _text(e.grid_g_per_kwh),
        "grid_source": e.grid_source,
        "grid_year": e.grid_year,
        "co2e_kg": _text(e.co2e_kg),
        "co2e_missing_kwh": _text(e.co2e_missing_kwh),
        "estimated": e.estimated,
        "power_source": e.power_source,
        "parts": e.parts,
        "notes": e.notes,
    }


class RunCostEnergyDetailSerializer(RunCostDetailSerializer):
    """The run detail with its `energy` object (kept apart from the other run objects)."""

    energy = serializers.SerializerMethodField()

    class Meta(RunCostDetailSerializer.Meta):
        fields = [*RunCostDetailSerializer.Meta.fields, "energy"]

    @extend_schema_field(ENERGY_SCHEMA)
    def get_energy(self, obj: RunCost) -> dict[str, Any] | None:
        return energy_body(run_energy(run_key(obj)))


def team_energy_body(row: TeamEnergy) -> dict[str, Any]:
    return {
        "team": row.team or None,
        "month": row.month,
        "runs": row.runs,
        "gpu_kwh": _text(row.gpu_kwh),
        "measured_kwh": _text(row.measured_kwh),
        "estimated_kwh": _text(row.estimated_kwh),
        "facility_kwh": _text(row.facility_kwh),
        "co2e_kg": _text(row.co2e_kg),
        "co2e_missing_kwh": _text(row.co2e_missing_kwh),
        "estimated": row.estimated,
    }


class EnergyView(APIView):
    """Energy and emissions per team of a month: the sum of its runs' (each over that month's
    GPU time). Teams the caller may see; `team` narrows; finance also sees runs no team owns."""

    @extend_schema(
        parameters=[month_parameter(required=True), team_parameter()],
        responses={200: {"type": "array", "items": {"type": "object"}}},
    )
    def get(self, request: Request) -> Response:
        query = PricingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = month_parse(query.validated_data["month"])
        slug = query.validated_data.get("team")
        teams = teams_asked(user=request.user, slug=slug)
        ids: list[int | None] = list(teams.values_list("pk", flat=True))
        if user_is_finance(request.user) and not slug:
            ids.append(None)
        rows = team_month_energy(month=month, team_ids=ids)
        return Response([team_energy_body(r) for r in rows])
