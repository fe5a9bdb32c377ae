"""Forms of the onboarding page (finops/web/onboarding_views.py)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.text import slugify

from finops.org.models import MappingRule, Profile, SsoRule, Team
from finops.text import validate_single_line

# The kinds the page maps (every kind MappingRule knows).
MAPPING_KINDS = [
    (MappingRule.Kind.SLURM_ACCOUNT, "Slurm account"),
    (MappingRule.Kind.NAMESPACE, "Kubernetes namespace"),
    (MappingRule.Kind.TAG, "Cloud tag key = value"),
    (MappingRule.Kind.LABEL, "Kubernetes pod label key = value"),
    (MappingRule.Kind.SUB_ACCOUNT, "Cloud sub-account id"),
]
INVITE_ROLES = [
    (Profile.Role.TEAM_LEAD, "Team lead (sees their teams)"),
    (Profile.Role.VIEWER, "Viewer (sees everything, changes nothing)"),
    (Profile.Role.FINANCE, "Finance"),
]


def _teams() -> forms.ModelChoiceField:
    return forms.ModelChoiceField(queryset=Team.objects.all(), to_field_name="slug")


class TeamForm(forms.Form):
    prefix = "team"
    name = forms.CharField(max_length=200, validators=[validate_single_line])
    slug = forms.SlugField(
        max_length=100, required=False, help_text="Left empty: made from the name."
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("slug") and data.get("name"):
            data["slug"] = slugify(data["name"])[:100]
            if not data["slug"]:
                self.add_error("slug", "The name gives no slug: enter one.")
        return data


class MappingForm(forms.Form):
    prefix = "mapping"
    team = _teams()
    kind = forms.ChoiceField(choices=MAPPING_KINDS)
    key = forms.CharField(
        max_length=200, required=False, validators=[validate_single_line],
        help_text="Tag or label key (tags and labels only).",
    )  # fmt: skip
    value = forms.CharField(max_length=500, validators=[validate_single_line])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        keyed = data.get("kind") in MappingRule.KEYED_KINDS
        if keyed and not data.get("key"):
            self.add_error("key", "A tag or label rule names its key.")
        if not keyed:
            data["key"] = ""
        return data


class InviteForm(forms.Form):
    prefix = "invite"
    email = forms.EmailField(max_length=254)
    role = forms.ChoiceField(choices=INVITE_ROLES)
    teams = forms.ModelMultipleChoiceField(
        queryset=Team.objects.all(), to_field_name="slug", required=False,
        help_text="A team lead's teams.",
    )  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        lead = data.get("role") == Profile.Role.TEAM_LEAD
        teams = list(data.get("teams") or [])
        if lead and not teams:
            self.add_error("teams", "Choose the teams this lead owns (at least one).")
        if not lead and teams:
            self.add_error("teams", "Only a team lead has teams: finance and viewers see all.")
        return data


class SsoRuleForm(forms.Form):
    prefix = "sso"
    claim = forms.CharField(max_length=100, initial="groups", validators=[validate_single_line])
    value = forms.CharField(max_length=500, validators=[validate_single_line])
    role = forms.ChoiceField(choices=INVITE_ROLES)
    team = forms.ModelChoiceField(queryset=Team.objects.all(), to_field_name="slug", required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        lead = data.get("role") == Profile.Role.TEAM_LEAD
        if lead and data.get("team") is None:
            self.add_error("team", "A team-lead rule names the team the lead owns.")
        if not lead and data.get("team") is not None:
            self.add_error("team", "Only a team-lead rule names a team.")
        if SsoRule.objects.filter(
            claim=data.get("claim"), value=data.get("value"), role=data.get("role"),
            team=data.get("team"),
        ).exists():  # fmt: skip
            raise forms.ValidationError("This rule exists already.")
        return data
