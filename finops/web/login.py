"""The login page: the company's single sign-on button when it is configured, and the
username + password form unless local passwords are off (finops.org.sso)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from finops.org.sso import sso_enabled


class LoginView(auth_views.LoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = sso_enabled()
        context["sso_label"] = settings.FINOPS_SSO_LABEL
        context["local_passwords"] = settings.FINOPS_LOCAL_PASSWORDS
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.FINOPS_LOCAL_PASSWORDS:
            return HttpResponse("Local passwords are turned off: use single sign-on.", status=403)
        return super().post(request, *args, **kwargs)
