"""Admin of teams and profiles. (MappingRule's admin, with its dry-run preview, is in
finops/attribution/admin.py.)"""

from __future__ import annotations

from django.contrib import admin

from finops.org.models import Profile, Team


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "role"]
    list_filter = ["role"]
    search_fields = ["user__username", "user__email"]
    filter_horizontal = ["teams"]
    list_select_related = ["user"]
