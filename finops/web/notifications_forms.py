from __future__ import annotations

from django import forms

from finops.notifications.models import NotificationPreference


class NotificationPreferenceForm(forms.Form):
    anomaly_mode = forms.ChoiceField(
        label="Cost anomalies",
        choices=NotificationPreference.AnomalyMode.choices,
        widget=forms.RadioSelect,
    )
    budget_emails = forms.BooleanField(
        label="Email me budget alerts (thresholds reached on actual or forecast spend)",
        required=False,
    )
