"""`/api/v1/notification-channels/`: chat and webhook channels of alerts (DESIGN section 10).

Body `{name, kind: slack|teams|webhook, url, team: slug|null, events: [budget, anomaly,
close]}`. Finance sees and saves every channel, the organisation's (team null) too; a lead their
teams' only; a viewer reads. The URL is a secret (Slack's and Teams' carry their key): answers
show it masked, and a PUT sends it again (a PATCH may leave it out). It is refused when it is
not https or resolves to a private, loopback or link-local address, unless
FINOPS_WEBHOOK_ALLOWED_HOSTS lists the host. A channel's detail lists its deliveries (the
outbox's rows: status, attempts, error).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from finops.api.fields import StrictCharField
from finops.notifications.channel_selectors import (
    channel_deliveries,
    channel_list_visible,
    url_masked,
)
from finops.notifications.channels import (
    NAME_MAX,
    URL_MAX,
    ChannelData,
    channel_create,
    channel_delete,
    channel_update,
)
from finops.notifications.models import EmailNotification, NotificationChannel


class NotificationChannelWriteSerializer(serializers.Serializer[dict[str, Any]]):
    name = StrictCharField(max_length=NAME_MAX)
    kind = serializers.ChoiceField(choices=NotificationChannel.Kind.choices)
    url = StrictCharField(
        max_length=URL_MAX,
        help_text="https URL of the Slack incoming webhook, the Teams workflow or your "
        "endpoint; private and loopback hosts only when FINOPS_WEBHOOK_ALLOWED_HOSTS lists them",
    )
    team = StrictCharField(
        allow_null=True, required=False, help_text="team slug; null: the organisation's"
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=NotificationChannel.Event.choices),
        allow_empty=False,
        max_length=len(NotificationChannel.Event.values),
    )


class DeliverySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    event = serializers.CharField(help_text="budget, anomaly, close, or test (the page's button)")
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=EmailNotification.Status.choices)
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField()


class NotificationChannelSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=NotificationChannel.Kind.choices)
    url = serializers.CharField(help_text="masked: scheme, host and the last 4 characters")
    team = serializers.CharField(allow_null=True)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=NotificationChannel.Event.choices)
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class NotificationChannelDetailSerializer(NotificationChannelSerializer):
    deliveries = DeliverySerializer(many=True, help_text="the newest 20 messages, sent or not")


def _row(channel: NotificationChannel) -> dict[str, Any]:
    return {
        "id": channel.pk,
        "name": channel.name,
        "kind": channel.kind,
        "url": url_masked(channel.url),
        "team": channel.team.slug if channel.team else None,
        "events": channel.events,
        "created_at": channel.created_at,
        "updated_at": channel.updated_at,
    }


def _detail(channel: NotificationChannel) -> dict[str, Any]:
    one = NotificationChannel.objects.filter(pk=channel.pk)
    return {**_row(channel), "deliveries": channel_deliveries(channels=one, limit=20)}


@extend_schema_view(
    list=extend_schema(responses=NotificationChannelSerializer(many=True)),
    retrieve=extend_schema(responses=NotificationChannelDetailSerializer),
    create=extend_schema(
        request=NotificationChannelWriteSerializer,
        responses={201: NotificationChannelDetailSerializer},
    ),
    update=extend_schema(
        request=NotificationChannelWriteSerializer, responses=NotificationChannelDetailSerializer
    ),
    partial_update=extend_schema(
        request=NotificationChannelWriteSerializer, responses=NotificationChannelDetailSerializer
    ),
)
class NotificationChannelViewSet(viewsets.ModelViewSet[NotificationChannel]):
    """Chat and webhook channels the caller may see; budget alerts, anomalies and month closes
    of their team (of every team, for the organisation's) are posted there once each."""

    serializer_class = NotificationChannelSerializer  # type: ignore[assignment]

    def get_queryset(self) -> QuerySet[NotificationChannel]:
        return channel_list_visible(user=self.request.user).order_by("name", "id")

    def _data(self, request: Request, channel: NotificationChannel | None) -> ChannelData:
        if not isinstance(request.data, dict):
            raise ApiValidationError({"non_field_errors": ["Send a JSON object."]})
        partial = request.method == "PATCH"
        body = NotificationChannelWriteSerializer(data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        values: dict[str, Any] = dict(body.validated_data)
        if channel is not None and partial:
            current = {"name": channel.name, "kind": channel.kind, "url": channel.url,
                       "team": channel.team.slug if channel.team else None,
                       "events": channel.events}  # fmt: skip
            values = {**current, **values}
        return ChannelData(
            name=values["name"],
            kind=values["kind"],
            url=values["url"],
            team=values.get("team"),
            events=list(values["events"]),
        )

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        channels = page if page is not None else list(self.get_queryset())
        data = NotificationChannelSerializer([_row(c) for c in channels], many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(NotificationChannelDetailSerializer(_detail(self.get_object())).data)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            channel = channel_create(user=request.user, data=self._data(request, None))
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from exc
        data = NotificationChannelDetailSerializer(_detail(channel)).data
        return Response(data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        channel = self.get_object()
        try:
            channel = channel_update(
                user=request.user, channel=channel, data=self._data(request, channel)
            )
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from exc
        return Response(NotificationChannelDetailSerializer(_detail(channel)).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        channel_delete(user=request.user, channel=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
