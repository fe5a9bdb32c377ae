"""/api/v1/anomalies/: list, retrieve, and PATCH of status + comment (DESIGN section 7)."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from finops.anomalies.models import Anomaly, AnomalyDriver
from finops.anomalies.selectors import anomaly_list_filtered, anomaly_list_visible
from finops.anomalies.services import AnomalyTransitionError, anomaly_status_change
from finops.api.fields import StrictCharField, StrictDateField
from finops.api.schema import ErrorSerializer
from finops.api.serializers import money
from finops.org.models import Team


class AnomalyDriverSerializer(serializers.ModelSerializer[AnomalyDriver]):
    actual = money()
    expected = money()
    delta = money()

    class Meta:
        model = AnomalyDriver
        fields = ["dimension", "key", "actual", "expected", "delta"]


class AnomalySerializer(serializers.ModelSerializer[Anomaly]):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    actual = money()
    expected = money()
    impact = money()
    unexplained = money(
        help_text="The impact the usage drivers (service, run, endpoint) do not explain."
    )
    unexplained_sku = money(
        allow_null=True, help_text="The impact the sku drivers do not explain (team cost only)."
    )
    unexplained_resource = money(
        allow_null=True,
        help_text="The impact the resource drivers do not explain (team cost only).",
    )
    drivers = AnomalyDriverSerializer(many=True, read_only=True)

    class Meta:
        model = Anomaly
        fields = [
            "id", "team", "kind", "series_kind", "series_key", "first_day", "last_day",
            "detected_on", "ongoing", "currency", "actual", "expected", "impact", "unexplained",
            "unexplained_sku", "unexplained_resource", "severity", "status", "drivers",
        ]  # fmt: skip
        read_only_fields = fields


# Something besides spaces, and no NUL character.
COMMENT_PATTERN = r"^[^\x00]*[^\s\x00][^\x00]*$"


class AnomalyStatusSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=Anomaly.Status.choices)
    comment = StrictCharField(
        allow_blank=False,
        trim_whitespace=True,
        help_text="Why: required, and not only spaces.",
        validators=[RegexValidator(COMMENT_PATTERN, message="Write a comment (no NUL).")],
    )


ANOMALY_STATUS_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": list(Anomaly.Status.values)},
        "comment": {
            "type": "string",
            "minLength": 1,
            "pattern": COMMENT_PATTERN,
            "description": "Why: required, and not only spaces.",
        },
    },
    "required": ["status", "comment"],
}


class AnomalyQuerySerializer(serializers.Serializer[Any]):
    team = serializers.CharField(required=False)
    status = serializers.ChoiceField(choices=[*Anomaly.Status.values, "open"], required=False)
    since = StrictDateField(required=False)
    until = StrictDateField(required=False)


_PARAMETERS = [
    OpenApiParameter("team", OpenApiTypes.STR, description="team slug"),
    OpenApiParameter(
        "status",
        OpenApiTypes.STR,
        enum=[*Anomaly.Status.values, "open"],
        description="open: new or acknowledged",
    ),
    OpenApiParameter("since", OpenApiTypes.DATE, description="days overlapping from this day"),
    OpenApiParameter("until", OpenApiTypes.DATE, description="days overlapping up to this day"),
]


@extend_schema_view(list=extend_schema(parameters=_PARAMETERS))
class AnomalyViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Anomaly]
):
    """Cost anomalies the caller may see (finance: all; a team lead: their teams'), newest
    first. PATCH `{"status", "comment"}` moves one through its workflow (comment required)."""

    serializer_class = AnomalySerializer
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self) -> QuerySet[Anomaly]:
        queryset = anomaly_list_visible(user=self.request.user).order_by("-first_day", "-id")
        if self.action != "list":
            return queryset
        query = AnomalyQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        return anomaly_list_filtered(queryset, **query.validated_data)

    @extend_schema(
        # Both keys are required though the method is PATCH (which drf-spectacular would
        # document as all-optional): the body is one move of the workflow, with its reason.
        request={"application/json": ANOMALY_STATUS_BODY},
        responses={
            200: AnomalySerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="The workflow has no such move from the anomaly's current status "
                "(e.g. new to new, or out of resolved).",
            ),
        },
    )
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        anomaly = self.get_object()
        body = AnomalyStatusSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            anomaly = anomaly_status_change(
                anomaly_id=anomaly.pk, status=body.validated_data["status"],
                comment=body.validated_data["comment"], user=request.user,
            )  # fmt: skip
        except AnomalyTransitionError as exc:
            # A valid status, but not from this one: a conflict with the anomaly's state.
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(AnomalySerializer(anomaly).data)
