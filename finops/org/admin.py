"""Admin of teams and profiles. (MappingRule's admin, with its dry-run preview, is in
finops/attribution/admin.py.)"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.forms import Field
from django.http import HttpRequest

from finops.org.models import Profile, SsoRule, Team
from finops.text import validate_single_line


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}

    def formfield_for_dbfield(
        self, db_field: models.Field[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> Field | None:
        # A team's name heads its statements and their emails: one line, no control character.
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is not None and db_field.name == "name":
            field.validators.append(validate_single_line)
        return field


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "role"]
    list_filter = ["role"]
    search_fields = ["user__username", "user__email"]
    filter_horizontal = ["teams"]
    list_select_related = ["user"]


@admin.register(SsoRule)
class SsoRuleAdmin(admin.ModelAdmin):
    """Single sign-on rules (finops.org.sso); finance also keeps them on the Onboarding page."""

    list_display = ["claim", "value", "role", "team"]
    list_filter = ["role", "team"]
    search_fields = ["claim", "value", "team__slug"]
    list_select_related = ["team"]
