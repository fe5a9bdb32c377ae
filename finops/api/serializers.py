"""API shapes. Money is a decimal string with every stored place (12); never a float."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from billing_ingest.models import ImportBatch
from finops.api.fields import StrictDateField
from finops.api.run_efficiency import (
    EFFICIENCY_SCHEMA,
    HEADLINE_SCHEMA,
    EfficiencyBody,
    HeadlineBody,
    efficiency_body,
    headlines,
    run_key,
)
from finops.api.schema import CURRENCY_PATTERN
from finops.attribution.inputs.list_cost import MIX_KINDS
from finops.attribution.models import RunCost
from finops.attribution.selectors.explorer import group_by_validate
from finops.attribution.selectors.reconciliation import Reconciliation, ReconciliationRow
from finops.attribution.selectors.reporting import NativeAmount, Reporting
from finops.attribution.selectors.timeseries import (
    INTERVALS,
    CostPoint,
    CostSeries,
    CostSeriesReport,
    SeriesPoint,
)
from finops.core.money import MONEY_PLACES, decimal_text
from finops.core.months import MONTH_PATTERN, month_format, month_parse
from finops.currency.services import currency_code
from finops.org.models import Team
from finops.run_metrics.selectors import run_efficiency

GPU_HOUR_PLACES = 6


def money(**kwargs: object) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=None,
        decimal_places=MONEY_PLACES,
        coerce_to_string=True,
        read_only=True,
        **kwargs,  # type: ignore[arg-type]
    )


@extend_schema_field({"type": "string", "format": "decimal", "deprecated": True})
class DeprecatedMoneyField(serializers.DecimalField):
    """An old name kept for one release; the schema marks it deprecated."""


def deprecated_money(**kwargs: object) -> DeprecatedMoneyField:
    return DeprecatedMoneyField(
        max_digits=None,
        decimal_places=MONEY_PLACES,
        coerce_to_string=True,
        read_only=True,
        **kwargs,  # type: ignore[arg-type]
    )


@extend_schema_field({"type": "string", "format": "decimal", "deprecated": True, "nullable": True})
class NullableDeprecatedMoneyField(DeprecatedMoneyField):
    """A deprecated name whose figure may be missing (null)."""


def deprecated_money_or_null(**kwargs: object) -> NullableDeprecatedMoneyField:
    return NullableDeprecatedMoneyField(
        max_digits=None,
        decimal_places=MONEY_PLACES,
        coerce_to_string=True,
        read_only=True,
        allow_null=True,
        **kwargs,  # type: ignore[arg-type]
    )


class TeamSerializer(serializers.ModelSerializer[Team]):
    class Meta:
        model = Team
        fields = ["slug", "name"]


class RunCostSerializer(serializers.ModelSerializer[RunCost]):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    month = serializers.SerializerMethodField()
    currency = serializers.CharField(source="billing_currency", read_only=True)
    cost = money()
    wasted_cost = deprecated_money(
        help_text=(
            "Deprecated: the whole cost of the run's failed and preempted attempts. Use waste "
            "by cause (`waste` on the run's detail; ?ordering=waste; /api/v1/waste/)."
        )
    )
    cost_per_gpu_hour = money(allow_null=True)
    gpu_hours = serializers.DecimalField(
        max_digits=None, decimal_places=GPU_HOUR_PLACES, coerce_to_string=True, read_only=True
    )
    gpu_seconds = serializers.DecimalField(
        max_digits=None, decimal_places=6, coerce_to_string=True, read_only=True
    )

    url = serializers.HyperlinkedIdentityField(view_name="api-run-detail")
    on_demand_cost = money(source="list_cost")
    on_demand_cost_estimated = money(source="list_cost_estimated")
    mix = serializers.SerializerMethodField()
    efficiency = serializers.SerializerMethodField()

    class Meta:
        model = RunCost
        fields = [
            "id",
            "url",
            "run_id",
            "team",
            "month",
            "cluster",
            "currency",
            "cost",
            "gpu_hours",
            "gpu_seconds",
            "cost_per_gpu_hour",
            "wasted_cost",
            "jobs",
            "failed_jobs",
            "running_jobs",
            "first_start",
            "last_end",
            "on_demand_cost",
            "on_demand_cost_estimated",
            "mix",
            "efficiency",
        ]

    def get_month(self, obj: RunCost) -> str:
        return month_format(obj.billing_period)

    def get_mix(self, obj: RunCost) -> dict[str, str]:
        """Cost by how it was bought, decimal strings."""
        return {kind: decimal_text(getattr(obj, f"cost_{kind}")) for kind in MIX_KINDS}

    @extend_schema_field(HEADLINE_SCHEMA)
    def get_efficiency(self, obj: RunCost) -> HeadlineBody | None:
        """The headline of what the run bought (finops.api.run_efficiency); null: no metrics."""
        return headlines([run_key(obj)])[run_key(obj)]


class RunCostDetailSerializer(RunCostSerializer):
    @extend_schema_field(EFFICIENCY_SCHEMA)
    def get_efficiency(self, obj: RunCost) -> EfficiencyBody | None:
        """What the run bought (DESIGN section 9); null when it has no metrics."""
        return efficiency_body(run_efficiency(run_key(obj)))


def month_validate(value: str) -> str:
    """A YYYY-MM the calendar has: the pattern alone lets "0000-01" through (a fuzzed 500)."""
    try:
        month_parse(value)
    except ValueError as exc:
        raise serializers.ValidationError("Enter a month as YYYY-MM.") from exc
    return value


class MonthQuerySerializer(serializers.Serializer[None]):
    month = serializers.RegexField(
        MONTH_PATTERN,
        error_messages={"invalid": "Enter a month as YYYY-MM.", "required": "month is required."},
    )

    def validate_month(self, value: str) -> str:
        return month_validate(value)

    def validate_group_by(self, value: str) -> str:
        try:
            return group_by_validate(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from exc


class PricingQuerySerializer(MonthQuerySerializer):
    # The month checked like the other reports' (a month out of range is a 400 naming it).
    team = serializers.SlugField(required=False)


class ReconciliationCurrencySerializer(serializers.Serializer[ReconciliationRow]):
    """One currency's total of the month: never added to another currency's."""

    currency = serializers.CharField()
    amortised_cost = money(
        source="amortised", help_text="Amortised cost: sum of EffectiveCost in this currency."
    )
    invoiced_cost = money(source="invoiced", help_text="Invoiced cost: sum of BilledCost.")
    attributed = serializers.DictField(child=money(), help_text="Ledger amount per category.")
    idle = money()
    unallocated = money()
    difference = money(help_text="amortised_cost - sum of every category; 0 once attribution ran.")


class ReconciliationAccountSerializer(serializers.Serializer[ReconciliationRow]):
    provider = serializers.CharField()
    billing_account_id = serializers.CharField()
    currency = serializers.CharField()
    amortised_cost = money(
        source="amortised",
        help_text="Amortised cost: sum of EffectiveCost of the month's line items.",
    )
    invoiced_cost = money(source="invoiced", help_text="Invoiced cost: sum of BilledCost.")
    billed = deprecated_money(source="amortised", help_text="Deprecated: use amortised_cost.")
    billed_cost = deprecated_money(source="invoiced", help_text="Deprecated: use invoiced_cost.")
    attributed = serializers.DictField(child=money(), help_text="Ledger amount per category.")
    idle = money()
    unallocated = money()
    difference = money(help_text="amortised_cost - sum of every category; 0 once attribution ran.")


class NativeAmountSerializer(serializers.Serializer[NativeAmount]):
    currency = serializers.CharField()
    amount = money()


class ConvertedTotalSerializer(serializers.Serializer[Reporting]):
    currency = serializers.CharField()
    total = money(source="total.total", allow_null=True, default=None)
    native = NativeAmountSerializer(source="total.native", many=True, default=list)
    error = serializers.CharField(help_text="Why there is no converted total (a missing rate).")


class ReconciliationSerializer(serializers.Serializer[Reconciliation]):
    month = serializers.SerializerMethodField()
    currency = serializers.CharField(
        source="figures_currency",
        allow_null=True,
        help_text="The currency of the top-level figures: the default currency, or the bill's "
        "own when the month is billed in one other currency only (a CUR in NOK); null when it "
        "is billed in several other currencies (see `totals_by_currency` and `note`).",
    )
    amortised_cost = money(
        source="figures.amortised",
        allow_null=True,
        help_text="Amortised cost (EffectiveCost) of the month in `currency`: what is "
        "attributed. Null when there is no single figure (see `note`), never a zero that is "
        "not the bill.",
    )
    invoiced_cost = money(
        source="figures.invoiced",
        allow_null=True,
        help_text="Invoiced cost (BilledCost) of the month in `currency`; null as above.",
    )
    billed = deprecated_money_or_null(
        source="figures.amortised", help_text="Deprecated: use amortised_cost."
    )
    billed_cost = deprecated_money_or_null(
        source="figures.invoiced", help_text="Deprecated: use invoiced_cost."
    )
    attributed = serializers.DictField(child=money(), source="figures.attributed", allow_null=True)
    idle = money(source="figures.idle", allow_null=True)
    unallocated = money(source="figures.unallocated", allow_null=True)
    difference = money(source="figures.difference", allow_null=True)
    note = serializers.CharField(
        help_text="Why the top-level figures are not in the default currency, or missing, and "
        "which FX rates to load for a converted total; empty when they are the default "
        "currency's."
    )
    totals_by_currency = ReconciliationCurrencySerializer(
        many=True, help_text="The month per billing currency, each as invoiced."
    )
    by_account = ReconciliationAccountSerializer(many=True)
    stale = serializers.BooleanField(
        help_text="True while the ledger may lag the bill: line items changed after the last "
        "successful attribution, or an attribution is running or failed. The difference is "
        "then not final."
    )
    stale_reason = serializers.CharField(help_text="Why it is stale; empty when not.")
    converted = ConvertedTotalSerializer(
        help_text="The month's ledger in the reporting currency at per-day FX rates; "
        "information only: reconciliation itself stays in native currencies."
    )

    def get_month(self, obj: Reconciliation) -> str:
        return month_format(obj.month)


class ImportBatchSerializer(serializers.ModelSerializer[ImportBatch]):
    # The file's name (or bucket URI), never the server's folders; error texts likewise.
    file_name = serializers.CharField(source="public_file_name", read_only=True)
    error = serializers.CharField(source="public_error", read_only=True)

    class Meta:
        model = ImportBatch
        fields = [
            "id",
            "kind",
            "format",
            "source",
            "file_name",
            "file_sha256",
            "status",
            "billing_periods",
            "row_count",
            "currency_totals",
            "error",
            "superseded_by",
            "created_at",
            "started_at",
            "finished_at",
        ]


# Longest since..until a series may span: bounds one request's rows and points.
COST_SERIES_MAX_DAYS = 731


class CostsQuerySerializer(serializers.Serializer[None]):
    """Without `interval`: the month report (month required). With it: flat points over a
    billing month or over days since..until (until defaults to today)."""

    month = serializers.RegexField(
        MONTH_PATTERN, required=False, error_messages={"invalid": "Enter a month as YYYY-MM."}
    )
    currency = serializers.CharField(
        required=False,
        help_text="ISO 4217 code; default: the reporting currency.",
        validators=[RegexValidator(CURRENCY_PATTERN, message="An ISO 4217 code such as USD.")],
    )
    group_by = serializers.CharField(
        default="team",
        help_text="team, provider, category, service, region, instance_type, account or tag:KEY",
    )
    team = serializers.CharField(required=False, help_text="team slug: that team's cost only")
    interval = serializers.ChoiceField(choices=list(INTERVALS), required=False)
    since = StrictDateField(required=False)
    until = StrictDateField(required=False)

    def validate_currency(self, value: str) -> str:
        try:
            return currency_code(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from exc

    def validate_month(self, value: str) -> str:
        return month_validate(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        has_range = "since" in attrs or "until" in attrs
        if "interval" not in attrs:
            if has_range:
                raise serializers.ValidationError({"since": ["since/until need interval."]})
            if "month" not in attrs:
                raise serializers.ValidationError({"month": ["month is required."]})
            return attrs
        if "month" in attrs:
            if has_range:
                raise serializers.ValidationError({"month": ["Give month or since/until."]})
            return attrs
        if "since" not in attrs:
            raise serializers.ValidationError({"since": ["Give month or since (YYYY-MM-DD)."]})
        until = attrs.setdefault("until", timezone.now().date())
        if until < attrs["since"]:
            raise serializers.ValidationError({"until": ["until is before since."]})
        if (until - attrs["since"]).days >= COST_SERIES_MAX_DAYS:
            raise serializers.ValidationError(
                {"until": [f"A series spans at most {COST_SERIES_MAX_DAYS} days."]}
            )
        return attrs


# The group keys a point may carry (a `tag:KEY` group names its key after the tag).
POINT_KEYS = {"team", "provider", "category", "account", "service", "region", "instance_type"}


class CostPointSerializer(serializers.Serializer[Any]):
    """One point of a series: `t` (bucket's first day), the group key named after group_by
    (`team`, `provider`, `category`, `account`, `service`, `region`, `instance_type`, or
    `tag:KEY`; only that one is present), `cost`, `currency`."""

    t = serializers.DateField(help_text="First day of the bucket (ISO date).")
    team = serializers.CharField(
        source="key", allow_null=True, required=False, help_text="Team slug; null: no team."
    )
    provider = serializers.CharField(source="key", required=False)
    category = serializers.CharField(source="key", required=False)
    account = serializers.CharField(source="key", required=False)
    service = serializers.CharField(source="key", required=False)
    region = serializers.CharField(source="key", required=False)
    instance_type = serializers.CharField(source="key", required=False)
    cost = money()
    currency = serializers.CharField()

    def to_representation(self, instance: CostPoint) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        group_by = self.context.get("group_by", "team")
        return {k: v for k, v in data.items() if k not in POINT_KEYS or k == group_by}


class SeriesPointSerializer(serializers.Serializer[SeriesPoint]):
    day = serializers.DateField()
    amount = money()


class CostSeriesSerializer(serializers.Serializer[CostSeries]):
    key = serializers.CharField(
        allow_null=True, help_text="Team slug (null: no team), provider or category."
    )
    name = serializers.CharField(source="label", help_text="Team name, provider or category.")
    total = money()
    points = SeriesPointSerializer(many=True)


class CostSeriesReportSerializer(serializers.Serializer[CostSeriesReport]):
    month = serializers.SerializerMethodField()
    currency = serializers.CharField()
    group_by = serializers.CharField()
    total = money(help_text="Converted per day, summed exactly, rounded once (12 places).")
    native_totals = NativeAmountSerializer(many=True)
    series = CostSeriesSerializer(many=True)

    def get_month(self, obj: CostSeriesReport) -> str:
        return month_format(obj.month)


IDLE_SHARE_PLACES = 6


class EndpointsQuerySerializer(MonthQuerySerializer):
    team = serializers.SlugField(required=False, help_text="Only this team's endpoints.")


class EndpointMonthSerializer(serializers.Serializer[Any]):
    """One team's part of an endpoint's month in one currency (finops.inference EndpointMonth)."""

    endpoint = serializers.CharField()
    team = serializers.CharField(
        allow_null=True, help_text="Slug of the team owning these pods (null: no team)."
    )
    month = serializers.CharField()
    currency = serializers.CharField()
    cost = money(help_text="Ledger cost of the team's pods of the endpoint in the month.")
    gpu_hours = serializers.DecimalField(
        max_digits=None, decimal_places=GPU_HOUR_PLACES, coerce_to_string=True, read_only=True
    )
    requests = serializers.IntegerField()
    tokens = serializers.IntegerField()
    cost_per_1k_requests = money(allow_null=True, help_text="Month cost x 1000 / requests.")
    cost_per_1m_tokens = money(allow_null=True, help_text="Month cost x 10^6 / tokens.")
    idle_share = serializers.DecimalField(
        max_digits=None,
        decimal_places=IDLE_SHARE_PLACES,
        coerce_to_string=True,
        read_only=True,
        allow_null=True,
        help_text="Idle part of the serving nodes' cost (0..1); finance only (else null).",
    )
    node_cost = money(
        allow_null=True,
        help_text="Every team's cost on the nodes serving these pods; finance only (else null).",
    )
    node_idle_cost = money(
        allow_null=True, help_text="The idle part of node_cost; finance only (else null)."
    )
