from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from kombu.exceptions import OperationalError as BrokerError

from billing_ingest.models import (
    BillingSource,
    Cluster,
    CoreWeaveRate,
    CostLineItem,
    ImportBatch,
    JobRecord,
)
from billing_ingest.services.sources import billing_source_check
from billing_ingest.tasks.sources import fetch_billing_source
from finops.audit.admin import AuditedAdminMixin
from finops.core.wording import counted


@admin.register(Cluster)
class ClusterAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["name", "time_zone"]
    search_fields = ["name"]


@admin.register(ImportBatch)
class ImportBatchAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "kind",
        "format",
        "source",
        "status",
        "row_count",
        "billing_periods",
        "created_at",
    ]
    list_filter = ["kind", "status", "format"]
    search_fields = ["source", "file_name", "file_sha256"]
    raw_id_fields = ["superseded_by"]
    readonly_fields = ["created_at", "started_at", "finished_at"]


@admin.register(CostLineItem)
class CostLineItemAdmin(admin.ModelAdmin):
    list_display = [
        "billing_period",
        "provider_name",
        "billing_account_id",
        "service_name",
        "resource_id",
        "charge_category",
        "effective_cost",
        "billed_cost",
        "billing_currency",
    ]
    list_filter = ["billing_period", "provider_name", "charge_category", "billing_currency"]
    search_fields = ["resource_id", "resource_name", "sku_id", "billing_account_id"]
    raw_id_fields = ["batch"]
    show_full_result_count = False


@admin.register(JobRecord)
class JobRecordAdmin(admin.ModelAdmin):
    list_display = [
        "cluster",
        "job_id",
        "attempt",
        "run_id",
        "user",
        "account",
        "state",
        "start",
        "end",
        "gpus",
    ]
    list_filter = ["cluster", "state"]
    search_fields = ["job_id", "run_id", "name", "user", "account"]
    raw_id_fields = ["batch"]
    show_full_result_count = False


@admin.register(CoreWeaveRate)
class CoreWeaveRateAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = [
        "instance_type",
        "pricing_category",
        "rate",
        "currency",
        "unit",
        "valid_from",
        "valid_to",
    ]
    list_filter = ["pricing_category", "currency", "instance_type"]
    search_fields = ["instance_type"]
    date_hierarchy = "valid_from"


class BillingSourceForm(forms.ModelForm):
    """Refuses, field by field, a source that could not be fetched (billing_source_check)."""

    class Meta:
        model = BillingSource
        fields = ["name", "format", "uri", "aws_export_arn", "aws_export_name", "enabled"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        billing_source_check(
            format=cleaned.get("format") or "",
            uri=cleaned.get("uri") or "",
            aws_export_arn=cleaned.get("aws_export_arn") or "",
            aws_export_name=cleaned.get("aws_export_name") or "",
            source_id=self.instance.pk,
        )
        return cleaned


@admin.register(BillingSource)
class BillingSourceAdmin(AuditedAdminMixin, admin.ModelAdmin):
    form = BillingSourceForm
    list_display = [
        "name",
        "format",
        "uri",
        "aws_export_name",
        "enabled",
        "last_status",
        "last_fetched_at",
        "fetching_since",
        "last_message",
    ]
    list_filter = ["enabled", "last_status", "format"]
    search_fields = ["name", "uri", "aws_export_name", "aws_export_arn"]
    readonly_fields = ["fetch_started_at", "last_fetched_at", "last_status", "last_message"]
    actions = ["fetch_now"]

    @admin.display(description="fetching since", ordering="fetch_started_at")
    def fetching_since(self, source: BillingSource) -> datetime | None:
        return source.fetch_started_at

    @admin.action(description="Fetch now")
    def fetch_now(self, request: HttpRequest, queryset: QuerySet[BillingSource]) -> None:
        # Queued like the schedule's fetches: the claim makes one already running skip this one.
        sources = list(queryset.filter(enabled=True).values_list("id", flat=True))
        try:
            for source_id in sources:
                fetch_billing_source.delay(source_id)
        except BrokerError as exc:
            # Redis or RabbitMQ down: say so on the page instead of a 500; nothing was fetched.
            self.message_user(
                request, f"could not queue the fetch (broker unreachable): {exc}", messages.ERROR
            )
            return
        self.message_user(request, f"{counted(len(sources), 'billing source fetch')} queued")
        disabled = queryset.filter(enabled=False).count()
        if disabled:
            self.message_user(
                request,
                f"{counted(disabled, 'disabled source')} skipped: enable them first",
                messages.WARNING,
            )
