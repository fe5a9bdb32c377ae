from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import QuerySet

from finops.org.models import Team
from finops.text import SingleLineCharField
from finops.tokens.services import MAX_EXPIRY_DAYS, NAME_MAX


class ApiTokenForm(forms.Form):
    name = SingleLineCharField(max_length=NAME_MAX, help_text="What uses it, e.g. “Grafana”.")
    read_only = forms.BooleanField(
        required=False, initial=True, help_text="GET only: any other method gets 403."
    )
    teams = forms.ModelMultipleChoiceField(
        queryset=Team.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every team you may see.",
    )
    expires_in_days = forms.IntegerField(
        min_value=1, max_value=MAX_EXPIRY_DAYS, required=False, initial=90, label="Expires in days"
    )

    def __init__(
        self, *args: Any, teams: QuerySet[Team], read_only_role: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if read_only_role:
            # A viewer's tokens are read-only: the box stays ticked whatever is posted.
            read_only = self.fields["read_only"]
            read_only.disabled = True
            read_only.initial = True
            read_only.help_text = "Your role is read-only, and so are your tokens."
        field = self.fields["teams"]
        assert isinstance(field, forms.ModelMultipleChoiceField)
        field.queryset = teams.order_by("name", "slug")
