"""What a web process does once, at start, so that its first request is not the one that pays
for it (issue 29, h-pages: the overview's first view in a fresh process was ~0.8 s on the
two-month demo and ~0.15 s after; most of the difference was this, not data):

- the URLconf: importing every app's `urls` (the API's pulls in DRF and drf-spectacular) and
  the resolver's reverse and namespace dictionaries, built on the first `{% url %}`;
- the page templates, parsed and kept by the cached template loader (DEBUG off).

No database access: it runs in finops/wsgi.py and finops/asgi.py before any request, where a
database that is not up yet must not stop the process from starting.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import get_template
from django.urls import get_resolver

# The page templates a person opens first (the rest are parsed on their first use).
PAGE_FOLDERS = ("web", "budgets", "anomalies")


def page_templates() -> list[str]:
    """base.html and the pages under PAGE_FOLDERS of the project's templates folder."""
    root = Path(settings.BASE_DIR) / "templates"
    names = ["base.html"]
    for folder in PAGE_FOLDERS:
        names += sorted(f"{folder}/{p.name}" for p in (root / folder).glob("*.html"))
    return names


def warm_up() -> list[str]:
    """Load the URLconf and its reverse dictionaries and parse the page templates; the names
    of the templates parsed."""
    resolver = get_resolver()
    # Touching these builds what the first {% url %} and the first resolve() would.
    resolver.reverse_dict  # noqa: B018
    resolver.namespace_dict  # noqa: B018
    resolver.app_dict  # noqa: B018
    loaded = []
    for name in page_templates():
        try:
            get_template(name)
        except (TemplateDoesNotExist, TemplateSyntaxError):  # a broken page fails on its own
            continue
        loaded.append(name)
    return loaded
