from django.contrib import admin

from finops.pipeline.models import PipelineRun, PipelineStep

_STEP_FIELDS = [
    "index", "key", "task", "status", "attempts", "started_at", "finished_at", "error",
]  # fmt: skip


class PipelineStepInline(admin.TabularInline):  # type: ignore[type-arg]
    model = PipelineStep
    extra = 0
    can_delete = False
    readonly_fields = _STEP_FIELDS
    fields = tuple(_STEP_FIELDS)


@admin.register(PipelineRun)
class PipelineRunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["id", "month", "status", "reason", "attempt", "created_at", "finished_at"]
    list_filter = ["status", "month"]
    readonly_fields = [
        "month", "reason", "status", "attempt", "retry_of", "error", "created_at", "started_at",
        "finished_at", "heartbeat_at",
    ]  # fmt: skip
    inlines = [PipelineStepInline]
