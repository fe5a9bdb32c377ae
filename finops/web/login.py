"""The login page: the company's single sign-on button when it is configured, and the
username + password form unless local passwords are off (finops.org.sso)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.urls import reverse_lazy

from finops.org.sso import sso_enabled


class LoginView(auth_views.LoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = sso_enabled()
        context["sso_label"] = settings.FINOPS_SSO_LABEL
        context["local_passwords"] = settings.FINOPS_LOCAL_PASSWORDS
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.FINOPS_LOCAL_PASSWORDS:
            return HttpResponse("Local passwords are turned off: use single sign-on.", status=403)
        return super().post(request, *args, **kwargs)


class InviteAcceptView(auth_views.PasswordResetConfirmView):
    """An invited person chooses their password (Django's one-use password-reset token: it
    stops working once the password changes), then logs in. Not there with local passwords off:
    the invitation then links the login page and its single sign-on."""

    template_name = "registration/invite_accept.html"
    success_url = reverse_lazy("login")

    def dispatch(self, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.FINOPS_LOCAL_PASSWORDS:
            raise Http404("Local passwords are turned off: sign in with single sign-on.")
        return super().dispatch(*args, **kwargs)
