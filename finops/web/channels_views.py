"""/channels/: the chat and webhook channels of alerts the user may see, a form to add one
(finance: any, the organisation's too; a lead: for their teams), deletion, and the history of
the messages posted (status, attempts, last error)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from finops.notifications.channel_selectors import (
    channel_deliveries,
    channel_list_visible,
    url_masked,
)
from finops.notifications.channels import (
    ChannelData,
    channel_create,
    channel_delete,
    channel_test_send,
)
from finops.org.permissions import user_is_finance, user_is_viewer, user_may_edit
from finops.org.selectors import team_list_visible
from finops.web.channels_forms import ORGANISATION, ChannelForm


def _form(request: HttpRequest) -> ChannelForm | None:
    """The add form, or None for those who may add no channel (viewers, leads of no team)."""
    user = request.user
    teams = list(team_list_visible(user=user).order_by("name"))
    organisation = user_may_edit(user)
    if user_is_viewer(user) or not (teams or organisation):
        return None
    data = request.POST if request.method == "POST" else None
    return ChannelForm(data, teams=teams, organisation=organisation)


@login_required
@require_http_methods(["GET", "POST"])
def channel_list(request: HttpRequest) -> HttpResponse:
    form = _form(request)
    if request.method == "POST" and form is not None and form.is_valid():
        values = form.cleaned_data
        data = ChannelData(
            name=values["name"],
            kind=values["kind"],
            url=values["url"],
            team=values["team"] if values["team"] != ORGANISATION else None,
            events=values["events"],
        )
        try:
            channel = channel_create(user=request.user, data=data)
        except ValidationError as error:
            for field, errors in error.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Channel {channel.name} added.")
            return redirect("channels:list")
    channels = channel_list_visible(user=request.user).order_by("name", "id")
    context = {
        "channels": [(c, url_masked(c.url)) for c in channels],
        "deliveries": channel_deliveries(
            channels=channels, limit=50, deleted_too=user_is_finance(request.user)
        ),
        "form": form,
        "may_write": form is not None,
    }
    return render(request, "notifications/channels.html", context)


@login_required
@require_POST
def channel_remove(request: HttpRequest, pk: int) -> HttpResponse:
    channel = get_object_or_404(channel_list_visible(user=request.user), pk=pk)
    channel_delete(user=request.user, channel=channel)  # PermissionDenied: a 403
    messages.success(request, f"Channel {channel.name} deleted.")
    return redirect("channels:list")


@login_required
@require_POST
def channel_test(request: HttpRequest, pk: int) -> HttpResponse:
    channel = get_object_or_404(channel_list_visible(user=request.user), pk=pk)
    channel_test_send(user=request.user, channel=channel)  # PermissionDenied: a 403
    messages.success(
        request, f"Test message queued for {channel.name}: its result shows under Messages posted."
    )
    return redirect("channels:list")
