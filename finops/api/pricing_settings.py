"""`/api/v1/pricing-settings/`: the pricing assumptions (issue 27).

GET (anyone signed in: every comparison shows them beside its figures) and PATCH (finance) of
any subset of the settings. A PATCH goes through the same model validation as the settings
page (finops.pricing.services.pricing_assumptions_check): a refused value is a 400 keyed by the
setting, with the message naming it and its bounds, and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from finops.api.fields import AsciiDecimalField, StrictCharField, StrictIntegerField
from finops.org.permissions import IsFinance
from finops.pricing.models import PricingAssumptions
from finops.pricing.services import ASSUMPTION_FIELDS, pricing_assumptions_update


class PricingSettingsSerializer(serializers.ModelSerializer[PricingAssumptions]):
    # Values keep their JSON types (finops.api.fields): a ratio is a decimal string of ASCII
    # digits ("0.35", never the number 0.35 or other scripts' digits), a count a JSON integer.
    # The objects (bands, notices, reserved ratios) are checked by the model's clean().
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DecimalField: AsciiDecimalField,
        models.PositiveIntegerField: StrictIntegerField,
        models.PositiveSmallIntegerField: StrictIntegerField,
        models.CharField: StrictCharField,
    }
    warnings = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="stored values that fail validation, replaced by their defaults when used",
    )  # fmt: skip

    class Meta:
        model = PricingAssumptions
        fields = [*ASSUMPTION_FIELDS, "updated_at", "warnings"]
        read_only_fields = ["updated_at"]


class _PricingSettingsTypes(PricingSettingsSerializer):
    """A PATCH body's JSON types alone: the bounds, and the messages that name each setting,
    are the model's (pricing_assumptions_update runs full_clean)."""

    def build_standard_field(self, field_name: str, model_field: Any) -> tuple[Any, Any]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        for key in ("min_value", "max_value", "validators", "max_length"):
            kwargs.pop(key, None)
        kwargs["allow_null"] = True  # a null is refused by clean(), naming the setting
        if "max_digits" in kwargs:
            kwargs.update(max_digits=None, decimal_places=None)
        return field_class, kwargs


def _body(row: PricingAssumptions) -> dict[str, Any]:
    in_use = PricingAssumptions.objects.get(pk=row.pk)
    warnings = in_use.usable()
    data = dict(PricingSettingsSerializer(row).data)
    return {**data, "warnings": warnings}


class PricingSettingsView(APIView):
    """The pricing assumptions. PATCH (finance) any of them; money and ratios as decimal
    strings, `interruption_bands`, `family_bands`, `notice_seconds` and `reserved_ratios` as
    objects."""

    def get_permissions(self) -> Sequence[Any]:
        if self.request.method == "PATCH":
            return [IsAuthenticated(), IsFinance()]
        return super().get_permissions()

    @extend_schema(responses=PricingSettingsSerializer)
    def get(self, request: Request) -> Response:
        return Response(_body(PricingAssumptions.current()))

    @extend_schema(request=PricingSettingsSerializer, responses=PricingSettingsSerializer)
    def patch(self, request: Request) -> Response:
        if not isinstance(request.data, Mapping):
            return Response(
                {"detail": "A JSON object of settings."}, status=status.HTTP_400_BAD_REQUEST
            )
        types = _PricingSettingsTypes(data=request.data, partial=True)
        types.is_valid(raise_exception=True)
        try:
            row = pricing_assumptions_update(user=request.user, values=dict(request.data))
        except ValidationError as exc:
            return Response(exc.message_dict, status=status.HTTP_400_BAD_REQUEST)
        return Response(_body(row))
