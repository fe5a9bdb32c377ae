"""/account/tokens/: a user's API tokens; create (the key is shown once) and revoke."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from finops.org.permissions import own_account_write, user_is_viewer
from finops.org.selectors import team_list_visible
from finops.tokens.models import ApiToken
from finops.tokens.selectors import api_token_list_for_user
from finops.tokens.services import TokenError, api_token_create, api_token_revoke
from finops.web.tokens_forms import ApiTokenForm


@own_account_write  # a viewer makes and revokes their own (read-only) tokens
@never_cache  # the response that shows a new key must not sit in any cache
@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    teams = team_list_visible(user=request.user)
    viewer = user_is_viewer(request.user)
    new_key = None
    if request.method == "POST":
        form = ApiTokenForm(request.POST, teams=teams, read_only_role=viewer)
        if form.is_valid():
            try:
                created = api_token_create(
                    user=request.user,  # type: ignore[arg-type]
                    name=form.cleaned_data["name"],
                    read_only=form.cleaned_data["read_only"],
                    team_slugs=[t.slug for t in form.cleaned_data["teams"]],
                    expires_in_days=form.cleaned_data["expires_in_days"],
                )
            except TokenError as exc:
                form.add_error(None, str(exc))
            else:
                # Rendered, not redirected: the key exists in clear only in this response.
                new_key = created.key
                form = ApiTokenForm(teams=teams, read_only_role=viewer)
    else:
        form = ApiTokenForm(teams=teams, read_only_role=viewer)
    context: dict[str, Any] = {
        "form": form,
        "tokens": api_token_list_for_user(user=request.user),  # type: ignore[arg-type]
        "new_key": new_key,
        "now": timezone.now(),
        "api_root": request.build_absolute_uri("/api/v1/"),
    }
    return render(request, "tokens/list.html", context)


@own_account_write
@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        token = api_token_revoke(token_id=pk, user=request.user)  # type: ignore[arg-type]
    except ApiToken.DoesNotExist as exc:
        raise Http404("No such token.") from exc
    messages.success(request, f"Token “{token.name}” revoked.")
    return redirect("tokens:list")
