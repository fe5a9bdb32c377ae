"""Error pages in the site's layout. 400/403/404 render with the request (the user's menu);
500 renders without it, since the database or the session may be what failed."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.template import loader


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    # Our own BadRequest messages say what was wrong with the query; Django's other 400s
    # (SuspiciousOperation) are not for people, so they get the generic text.
    message = str(exception) if type(exception) is BadRequest else ""
    return render(request, "400.html", {"message": message}, status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    return render(request, "403.html", {}, status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return render(request, "404.html", {}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    return HttpResponseServerError(loader.get_template("500.html").render())
