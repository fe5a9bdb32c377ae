"""API of chargeback statements: the month's statements (JSON), one statement with its runs
and endpoints, and the CSV / PDF files (the same ones the pages offer)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from finops.api.renderers import JSONRenderer
from finops.api.schema import month_parameter, team_parameter
from finops.api.serializers import MonthQuerySerializer, money
from finops.chargeback import documents
from finops.chargeback.selectors import Statement, statement_get, statements_build
from finops.core.months import MONTH_PATTERN, month_format, month_parse
from finops.org.selectors import team_list_visible


@extend_schema_field({"type": "string", "pattern": MONTH_PATTERN, "example": "2025-09"})
class MonthStringField(serializers.Field):  # type: ignore[type-arg]
    """A month (a date, its first day) written as YYYY-MM: documented as that string, not as a
    date, which a client would then fail to parse."""

    def to_representation(self, value: Any) -> str:
        return month_format(value)


class NativeTotalSerializer(serializers.Serializer[Any]):
    currency = serializers.CharField()
    amount = money()


class StatementLineSerializer(serializers.Serializer[Any]):
    item = serializers.CharField(source="key", help_text="Category, run id or endpoint.")
    currency = serializers.CharField(help_text="Native (billing) currency.")
    amount = money(help_text="Native amount (amortised cost).")
    reporting_amount = money(
        allow_null=True, help_text="In the statement's currency; null when a rate is missing."
    )


class AdjustmentLineSerializer(StatementLineSerializer):
    origin_month = MonthStringField(help_text="The closed month corrected (YYYY-MM).")
    reason = serializers.CharField()


class UsageLineSerializer(StatementLineSerializer):
    gpu_hours = serializers.DecimalField(
        max_digits=None, decimal_places=6, coerce_to_string=True, read_only=True
    )


class StatementSerializer(serializers.Serializer[Any]):
    team = serializers.CharField(source="team.slug")
    month = MonthStringField(help_text="YYYY-MM")
    status = serializers.CharField(help_text="open, or closed (frozen figures).")
    closed_at = serializers.DateTimeField(source="close.closed_at", default=None, allow_null=True)
    currency = serializers.CharField(help_text="The reporting currency of the statement.")
    total = money(source="total_reporting", allow_null=True, help_text="Ledger + adjustments.")
    ledger_total = money(source="ledger_reporting", allow_null=True)
    adjustments_total = money(source="adjustments_reporting", allow_null=True)
    native_totals = NativeTotalSerializer(source="total_native", many=True)
    categories = StatementLineSerializer(many=True)
    adjustments = AdjustmentLineSerializer(many=True)
    fx_error = serializers.CharField()
    csv_url = serializers.SerializerMethodField()
    pdf_url = serializers.SerializerMethodField()

    def _file_url(self, obj: Statement, extension: str) -> str:
        path = reverse(
            "api-statement-file", args=[obj.team.slug, month_format(obj.month), extension]
        )
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    def get_csv_url(self, obj: Statement) -> str:
        return self._file_url(obj, "csv")

    def get_pdf_url(self, obj: Statement) -> str:
        return self._file_url(obj, "pdf")


class StatementDetailSerializer(StatementSerializer):
    runs = UsageLineSerializer(many=True)
    endpoints = UsageLineSerializer(many=True)


class StatementsQuerySerializer(MonthQuerySerializer):
    team = serializers.SlugField(required=False, help_text="Only this team's statement.")


class StatementListView(APIView):
    """The month's chargeback statements of the teams the caller may see (those with any
    figure): amortised cost by category and adjustments, in the reporting currency with the
    native amounts. A closed month's statements are the frozen ones."""

    @extend_schema(
        parameters=[
            month_parameter(required=True),
            team_parameter(),
        ],
        responses=StatementSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        query = StatementsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        teams = team_list_visible(user=request.user)
        if query.validated_data.get("team"):
            teams = teams.filter(slug=query.validated_data["team"])
        found = statements_build(month=month_parse(query.validated_data["month"]), teams=teams)
        return Response(StatementSerializer(found, many=True, context={"request": request}).data)


def _statement(request: Request, team: str, month: str) -> Statement:
    visible = get_object_or_404(team_list_visible(user=request.user), slug=team)
    try:
        when = month_parse(month)
    except ValueError as exc:
        raise Http404("Months are YYYY-MM.") from exc
    return statement_get(team=visible, month=when)


class StatementDetailView(APIView):
    """One team's statement with its runs and endpoints (404: not a team the caller sees)."""

    @extend_schema(responses=StatementDetailSerializer)
    def get(self, request: Request, team: str, month: str) -> Response:
        data = _statement(request, team, month)
        return Response(StatementDetailSerializer(data, context={"request": request}).data)


class StatementFileView(APIView):
    """The statement as a file: `.csv` (every stored decimal) or `.pdf`."""

    # The extension picks the file; `?format=` has nothing to choose, and errors are JSON.
    renderer_classes = [JSONRenderer]

    @extend_schema(
        operation_id="v1_statements_file_retrieve",
        parameters=[
            OpenApiParameter(
                "extension", OpenApiTypes.STR, OpenApiParameter.PATH, enum=["csv", "pdf"]
            )
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/pdf"): OpenApiTypes.BINARY,
        },
    )
    def get(self, request: Request, team: str, month: str, extension: str) -> HttpResponse:
        if extension not in documents.CONTENT_TYPES:
            raise Http404("Statements are .csv or .pdf.")
        return documents.statement_response(_statement(request, team, month), extension=extension)
