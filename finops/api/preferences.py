"""/api/v1/me/notification-preferences/: the caller's own email settings (GET, PUT, PATCH)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from finops.api.fields import StrictBooleanField
from finops.notifications.models import NotificationPreference
from finops.notifications.selectors import notification_preference_get
from finops.notifications.services import notification_preference_set
from finops.org.permissions import own_account_write


class NotificationPreferenceSerializer(serializers.Serializer[Any]):
    anomaly_mode = serializers.ChoiceField(
        choices=NotificationPreference.AnomalyMode.choices,
        help_text="immediate: one email per new anomaly; digest: one a day; off: none.",
    )
    budget_emails = StrictBooleanField(help_text="Whether budget alerts are emailed.")
    # A plain string, not format "email": a user without an address has "" here, which an
    # email-format schema would call invalid (schemathesis found it).
    email = serializers.CharField(
        source="user.email", read_only=True, help_text="Where the emails go (may be empty)."
    )


@own_account_write
class NotificationPreferenceView(APIView):
    """The signed-in user's email settings. Anyone signed in may read and change their own
    (a viewer too: they are the viewer's own, not the organisation's data); no one else's are
    reachable here. A read-only API token still only reads."""

    @extend_schema(responses=NotificationPreferenceSerializer)
    def get(self, request: Request) -> Response:
        preference = notification_preference_get(user=request.user)
        return Response(NotificationPreferenceSerializer(preference).data)

    @extend_schema(
        request=NotificationPreferenceSerializer, responses=NotificationPreferenceSerializer
    )
    def put(self, request: Request) -> Response:
        return self._save(request, partial=False)

    @extend_schema(
        request=NotificationPreferenceSerializer, responses=NotificationPreferenceSerializer
    )
    def patch(self, request: Request) -> Response:
        return self._save(request, partial=True)

    def _save(self, request: Request, *, partial: bool) -> Response:
        current = notification_preference_get(user=request.user)
        body = NotificationPreferenceSerializer(current, data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        preference = notification_preference_set(
            user=request.user,
            anomaly_mode=data.get("anomaly_mode", current.anomaly_mode),
            budget_emails=data.get("budget_emails", current.budget_emails),
        )
        return Response(NotificationPreferenceSerializer(preference).data)
