from django.contrib import admin

from finops.tokens.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read-mostly: keys are made on /account/tokens/ or by `api_token create` (shown once)."""

    list_display = ["name", "user", "prefix", "read_only", "expires_at", "last_used_at"]
    list_filter = ["read_only"]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = ["user", "prefix", "key_hash", "created_at", "last_used_at"]
    filter_horizontal = ["teams"]
