"""Error pages in the site's layout. 400/403/404 render with the request (the user's menu);
500 renders without it, since the database or the session may be what failed.

Under /api/ the same errors are JSON (`{"detail": "..."}`, as DRF answers inside its views):
an unknown API path, an id the URL pattern does not take (`/api/v1/runs/1.5/`), a 500 outside a
view. A client of the API never gets an HTML page."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.shortcuts import render
from django.template import loader

API_PREFIX = "/api/"


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def _api_error(detail: str, status: int) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    # Our own BadRequest messages say what was wrong with the query; Django's other 400s
    # (SuspiciousOperation) are not for people, so they get the generic text.
    message = str(exception) if type(exception) is BadRequest else ""
    if _is_api(request):
        return _api_error(message or "Bad request.", 400)
    return render(request, "400.html", {"message": message}, status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return _api_error("You do not have permission to perform this action.", 403)
    return render(request, "403.html", {}, status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return _api_error("Not found.", 404)
    return render(request, "404.html", {}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return _api_error("Server error.", 500)
    return HttpResponseServerError(loader.get_template("500.html").render())
