"""The onboarding page (finance): add teams, map Slurm accounts, namespaces and tags to them,
invite leads and viewers, and keep the single sign-on rules. One page; each form posts to its
own URL and comes back to the page (with its errors, or a message saying what was done).
Thin: check access, validate the form, call finops.onboarding.services, render."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from finops.onboarding import services as onboarding
from finops.org.permissions import user_may_edit
from finops.org.selectors import onboarding_people, onboarding_teams, sso_rules_org_wide
from finops.org.sso import sso_enabled
from finops.web.access import require_finance
from finops.web.onboarding_forms import InviteForm, MappingForm, SsoRuleForm, TeamForm

FORMS: dict[str, type[Form]] = {
    "team_form": TeamForm,
    "mapping_form": MappingForm,
    "invite_form": InviteForm,
    "sso_form": SsoRuleForm,
}


def _page(request: HttpRequest, bound: dict[str, Form] | None = None) -> HttpResponse:
    context: dict[str, Any] = {name: form_class() for name, form_class in FORMS.items()}
    context.update(bound or {})
    context.update(
        teams=onboarding_teams(),
        people=onboarding_people(),
        sso_rules=sso_rules_org_wide(),
        sso_enabled=sso_enabled(),
        may_edit=user_may_edit(request.user),
    )
    status = 400 if bound else 200
    return render(request, "web/onboarding.html", context, status=status)


@login_required
def onboarding_page(request: HttpRequest) -> HttpResponse:
    require_finance(request)
    return _page(request)


def _post(request: HttpRequest, name: str, action: Callable[[dict[str, Any]], str]) -> HttpResponse:
    """Validate FORMS[name] from the body and run `action` on its data (it returns the message);
    a refused form or action shows the page again with the reason."""
    if not user_may_edit(request.user):
        raise PermissionDenied("Finance only.")
    form = FORMS[name](request.POST)
    if form.is_valid():
        try:
            messages.success(request, action(form.cleaned_data))
            return redirect("web:onboarding")
        except (onboarding.OnboardingError, ValidationError) as error:
            form.add_error(None, "; ".join(getattr(error, "messages", [str(error)])))
    return _page(request, {name: form})


@login_required
@require_POST
def team_add(request: HttpRequest) -> HttpResponse:
    def act(data: dict[str, Any]) -> str:
        team = onboarding.team_create(actor=request.user, name=data["name"], slug=data["slug"])
        return f"Team {team.name} ({team.slug}) added."

    return _post(request, "team_form", act)


@login_required
@require_POST
def mapping_add(request: HttpRequest) -> HttpResponse:
    def act(data: dict[str, Any]) -> str:
        rule = onboarding.mapping_rule_add(
            actor=request.user,
            rule=onboarding.MappingInput(
                team=data["team"], kind=data["kind"], key=data["key"], value=data["value"]
            ),
        )
        return f"Mapped {rule}. It applies from the next attribution (Pipeline page)."

    return _post(request, "mapping_form", act)


@login_required
@require_POST
def invite(request: HttpRequest) -> HttpResponse:
    def act(data: dict[str, Any]) -> str:
        onboarding.person_invite(
            actor=request.user, email=data["email"], role=data["role"], teams=list(data["teams"])
        )
        return f"Invited {data['email']}: the email with their link is in the outbox."

    return _post(request, "invite_form", act)


@login_required
@require_POST
def sso_rule_add(request: HttpRequest) -> HttpResponse:
    def act(data: dict[str, Any]) -> str:
        rule = onboarding.sso_rule_add(
            actor=request.user,
            claim=data["claim"],
            value=data["value"],
            role=data["role"],
            team=data["team"],
        )
        return f"Sign-in rule added: {rule}."

    return _post(request, "sso_form", act)


@login_required
@require_POST
def rule_delete(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    if not user_may_edit(request.user):
        raise PermissionDenied("Finance only.")
    delete = {"mapping": onboarding.mapping_rule_delete, "sso": onboarding.sso_rule_delete}[kind]
    try:
        delete(actor=request.user, rule_id=pk)
        messages.success(request, "Rule deleted.")
    except onboarding.OnboardingError as error:
        messages.error(request, str(error))
    return redirect("web:onboarding")
