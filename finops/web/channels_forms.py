from __future__ import annotations

from typing import Any

from django import forms

from finops.notifications.models import NotificationChannel
from finops.org.models import Team

ORGANISATION = ""


class ChannelForm(forms.Form):
    """A new channel. Its rules (who may save it for which team, the URL's address) are the
    service's (finops.notifications.channels), so the page and the API refuse the same."""

    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=NotificationChannel.Kind.choices)
    url = forms.CharField(
        label="Webhook URL",
        max_length=2000,
        help_text="https only; private and loopback hosts only when the server's "
        "FINOPS_WEBHOOK_ALLOWED_HOSTS lists them.",
    )
    team = forms.ChoiceField(label="For", required=False)
    events = forms.MultipleChoiceField(
        choices=NotificationChannel.Event.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=NotificationChannel.Event.values,
    )

    def __init__(self, *args: Any, teams: list[Team], organisation: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(ORGANISATION, "The organisation (every team)")] if organisation else []
        field = self.fields["team"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices + [(t.slug, t.name) for t in teams]
