"""Content-Security-Policy header on every response (Django 5.2 has no built-in CSP).

The pages load scripts and styles from our own static files only: no inline <script>, no
style attributes in the HTML (bar widths are CSS classes). Chart.js sizes its canvas through
the CSSOM (element.style), which a CSP does not restrict, so styles need no 'unsafe-inline'.
The policy is settings.FINOPS_CONTENT_SECURITY_POLICY; an empty value sends no header.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.policy: str = settings.FINOPS_CONTENT_SECURITY_POLICY

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        return response
