"""Text that comes in from outside: one set of rules for the API, the forms, URLs and filters.

PostgreSQL refuses a NUL character in any text (a 500 if it reaches a query) and a value longer
than its column; SQLite stores both. So text is checked before it reaches the database:

- `NulRejectMiddleware`: a NUL in the path or in a query parameter (name or value), or in a
  posted form field, is a 400 naming where it was (JSON under /api/, the error page elsewhere).
  Every page and filter is covered, including the ones added later. JSON bodies are checked by
  what reads them: DRF's CharField refuses NUL, and the budgets service uses `text_clean`.
- `text_clean`: a service's check of one field (NUL, lone surrogates, length and, for names and
  other one-line text, control characters), raising ValidationError({field: [message]}), so the
  API and the forms that call the same service reject the same input with the field named.
- `SingleLineCharField`: a form field with the same one-line rules (names in forms).

A one-line text (a name, a tag, a provider) holds no control character at all: a newline in a
budget name made every email about it fail (a header cannot hold one). Multi-line text (a
reason, a comment) may hold newlines and tabs, never NUL or another control character.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from django import forms
from django.core.exceptions import BadRequest, ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse

NUL = "\x00"
# Allowed in multi-line text only.
_MULTILINE_CONTROLS = frozenset("\n\r\t")


def text_problem(value: str, *, single_line: bool = True) -> str | None:
    """Why `value` may not be stored, or None. Checks NUL, lone surrogates (not UTF-8: the
    database driver cannot encode them) and control characters (any for one-line text; all but
    newline, carriage return and tab for multi-line text)."""
    for char in value:
        if char == NUL:
            return "Null characters are not allowed."
        category = unicodedata.category(char)
        if category == "Cs":
            return "Lone surrogate characters are not allowed (not valid UTF-8)."
        if single_line and category in ("Cc", "Zl", "Zp"):
            return "Control characters (such as a newline or a tab) are not allowed here."
        if not single_line and category == "Cc" and char not in _MULTILINE_CONTROLS:
            return "Control characters other than newlines and tabs are not allowed."
    return None


def text_clean(
    value: object,
    *,
    field: str,
    max_length: int | None = None,
    single_line: bool = True,
    label: str = "",
) -> str:
    """`value` as stored text, stripped; ValidationError({field: [why]}) when it may not be.
    `label` names the part of the field in a length message (e.g. "The tag key")."""
    text = "" if value is None else str(value)
    problem = text_problem(text, single_line=single_line)
    if problem is not None:
        raise ValidationError({field: [problem]})
    text = text.strip()
    if max_length is not None and len(text) > max_length:
        what = label or "This value"
        raise ValidationError(
            {field: [f"{what} has {len(text)} characters; at most {max_length} are allowed."]}
        )
    return text


def validate_single_line(value: str) -> None:
    """A Django validator (form or model field) for one-line text."""
    problem = text_problem(value, single_line=True)
    if problem is not None:
        raise ValidationError(problem, code="control_characters")


def validate_multiline(value: str) -> None:
    """A Django validator for multi-line text (newlines and tabs allowed)."""
    problem = text_problem(value, single_line=False)
    if problem is not None:
        raise ValidationError(problem, code="control_characters")


class SingleLineCharField(forms.CharField):
    """A form CharField that also refuses control characters (names and other one-line text)."""

    default_validators = [validate_single_line]


# --- requests -------------------------------------------------------------------------------


def _nul_in_pairs(pairs: Iterable[tuple[str, str]]) -> str | None:
    """The name of the first parameter whose name or value holds a NUL."""
    for name, value in pairs:
        if NUL in name:
            return "(a parameter name)"
        if NUL in value:
            return name
    return None


def request_nul_field(request: HttpRequest) -> str | None:
    """Where a NUL is in the request's path or query string, or None."""
    if NUL in request.path:
        return "path"
    return _nul_in_pairs(
        parse_qsl(request.META.get("QUERY_STRING", ""), keep_blank_values=True, errors="replace")
    )


def request_body_nul_field(request: HttpRequest, view: Callable[..., Any]) -> str | None:
    """Where a NUL is in a POST's form fields (or an uploaded file's name), or None. Read only
    where CSRF protection reads the body anyway: a urlencoded body, or any form posted to a
    CSRF-checked view. A view exempt from it (the upload page, which checks an upload's size
    from its headers before reading it, and the API, whose parsers and serializers check what
    they read) keeps its body unread here."""
    if request.method != "POST":
        return None
    urlencoded = request.content_type == "application/x-www-form-urlencoded"
    multipart = request.content_type == "multipart/form-data"
    if not (urlencoded or (multipart and not getattr(view, "csrf_exempt", False))):
        return None
    found = _nul_in_pairs((k, v) for k, values in request.POST.lists() for v in values)
    if found is None and multipart:
        found = _nul_in_pairs(
            (k, f.name or "") for k, files in request.FILES.lists() for f in files
        )
    return found


def _bad_request(request: HttpRequest, field: str) -> HttpResponse:
    message = "Null characters are not allowed."
    if request.path.startswith("/api/"):
        body: dict[str, Any] = {field: [message]}
        return JsonResponse(body, status=400)
    raise BadRequest(f"{field}: {message}")


class NulRejectMiddleware:
    """Answers 400 to a request with a NUL in its path, query or form fields, naming the field:
    `{"<field>": ["Null characters are not allowed."]}` under /api/, the error page elsewhere."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = request_nul_field(request)
        if field is not None:
            return _bad_request(request, field)
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., HttpResponse],
        view_args: Any,
        view_kwargs: Any,
    ) -> HttpResponse | None:
        field = request_body_nul_field(request, view_func)
        return _bad_request(request, field) if field is not None else None
