from django.contrib import admin

from finops.org.models import MappingRule, Profile, Team


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


@admin.register(MappingRule)
class MappingRuleAdmin(admin.ModelAdmin):
    list_display = ["priority", "kind", "key", "value", "team"]
    list_filter = ["kind", "team"]
    search_fields = ["key", "value", "team__slug"]
    list_select_related = ["team"]
    ordering = ["priority", "id"]
