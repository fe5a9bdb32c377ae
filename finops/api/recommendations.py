"""/api/v1/recommendations/ (DESIGN section 10): actions with their money, and PATCH of
status + comment.

`?month=YYYY-MM` (default: the newest attributed month) `&team=slug` `&status=`; each item
`{id, kind, team, title, action, monthly_savings, currency, confidence, assumptions, evidence,
status}` (plus the comment and who changed the status when). Finance sees every recommendation, the
organisation's (team null: idle pools no team bears) too; a team lead their teams'. A month is
computed again on read when its attribution, the assumptions or the prices moved since.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from finops.api.fields import StrictCharField
from finops.api.schema import SLUG_PATTERN, month_parameter, team_parameter
from finops.core.months import month_parse
from finops.org.selectors import team_list_visible
from finops.pricing.models import Recommendation
from finops.pricing.recommendations import (
    RecommendationPermissionError,
    recommendation_body,
    recommendation_list_filtered,
    recommendation_list_visible,
    recommendation_status_change,
    recommendations_current,
    recommendations_newest_month,
)


class RecommendationSerializer(serializers.Serializer[Recommendation]):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Recommendation.Kind.choices)
    team = serializers.CharField(allow_null=True, help_text="team slug; null: the organisation")
    month = serializers.CharField(help_text="YYYY-MM")
    title = serializers.CharField()
    action = serializers.CharField(help_text="what to do, with the money")
    monthly_savings = serializers.DecimalField(max_digits=20, decimal_places=2)
    currency = serializers.CharField()
    confidence = serializers.ChoiceField(choices=Recommendation.Confidence.choices)
    assumptions = serializers.DictField()
    evidence = serializers.DictField()
    status = serializers.ChoiceField(choices=Recommendation.Status.choices)
    comment = serializers.CharField(allow_blank=True)
    status_changed_at = serializers.DateTimeField(allow_null=True)
    status_changed_by = serializers.CharField(allow_blank=True)

    def to_representation(self, instance: Recommendation) -> dict[str, Any]:
        return recommendation_body(instance)


class RecommendationStatusSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=Recommendation.Status.choices)
    comment = StrictCharField(
        allow_blank=True, required=False, trim_whitespace=True, max_length=2000
    )


_STATUS_BODY = {
    "type": "object",
    "required": ["status"],
    "additionalProperties": False,
    "properties": {
        "status": {"type": "string", "enum": list(Recommendation.Status.values)},
        "comment": {"type": "string", "maxLength": 2000},
    },
}


class RecommendationQuerySerializer(serializers.Serializer[Any]):
    month = serializers.CharField(required=False)
    # A team slug, as the schema's pattern says (any other text is a 400, not an empty list).
    team = serializers.RegexField(SLUG_PATTERN, required=False)
    status = serializers.ChoiceField(choices=Recommendation.Status.choices, required=False)


_PARAMETERS = [
    month_parameter(required=False, description="YYYY-MM; default: the newest attributed month"),
    team_parameter(),
    OpenApiParameter("status", OpenApiTypes.STR, enum=Recommendation.Status.values),
]


@extend_schema_view(list=extend_schema(parameters=_PARAMETERS))
class RecommendationViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Recommendation]
):
    """Recommendations the caller may see, largest monthly savings first. PATCH
    `{"status": "open"|"done"|"dismissed", "comment"}`: finance, or the team's lead."""

    serializer_class = RecommendationSerializer
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self) -> QuerySet[Recommendation]:
        rows = recommendation_list_visible(user=self.request.user)
        if self.action != "list" or getattr(self, "swagger_fake_view", False):
            return rows
        query = RecommendationQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        month = recommendations_newest_month()
        if "month" in query.validated_data:
            try:
                month = month_parse(query.validated_data["month"])
            except ValueError as exc:
                raise ValidationError({"month": [str(exc)]}) from exc
        if month is None:
            return rows.none()
        team = None
        slug = query.validated_data.get("team")
        if slug:
            team = team_list_visible(user=self.request.user).filter(slug=slug).first()
            if team is None:
                raise NotFound("no such team")
        recommendations_current(month=month)
        return recommendation_list_filtered(
            rows, month=month, team=team, status=query.validated_data.get("status")
        )

    # Inline, not the serializer: drf-spectacular documents a PATCH body with every field
    # optional, and `status` is required (an empty body is a 400 the schema must state).
    @extend_schema(request={"application/json": _STATUS_BODY}, responses=RecommendationSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        row = self.get_object()
        body = RecommendationStatusSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            row = recommendation_status_change(
                recommendation_id=row.pk, status=body.validated_data["status"],
                comment=body.validated_data.get("comment", ""), user=request.user,
            )  # fmt: skip
        except RecommendationPermissionError as exc:
            raise PermissionDenied(str(exc)) from exc
        return Response(recommendation_body(row))
