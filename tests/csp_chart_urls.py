"""URLconf for tests/browser/test_csp_browser.py: the project's URLs plus two test pages, one with a
chart drawn by static/finops-charts.js, one with an inline script (which the CSP must block)."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.template import engines
from django.urls import include, path

CHART_PAGE = """{% extends "base.html" %}{% block content %}
<h1>Chart under CSP</h1>
<canvas id="c" data-chart="series" data-chart-type="line"></canvas>
<table id="series" class="data"><thead><tr><th>Day</th><th>Cost (USD)</th><th>Idle (USD)</th>
</tr></thead><tbody><tr><td>1 Sep</td><td>10.00</td><td>2.00</td></tr>
<tr><td>2 Sep</td><td>20.00</td><td>1.50</td></tr></tbody></table>
{% endblock %}{% block scripts %}{% include "includes/chart_scripts.html" %}{% endblock %}"""

INLINE_PAGE = """<!doctype html><html><body><p>inline</p>
<script>document.title = "inline ran";</script></body></html>"""


def _page(source: str) -> Callable[[HttpRequest], HttpResponse]:
    def view(request: HttpRequest) -> HttpResponse:
        return HttpResponse(engines["django"].from_string(source).render({}, request))

    return view


urlpatterns = [
    path("csp-test/chart/", _page(CHART_PAGE)),
    path("csp-test/inline/", _page(INLINE_PAGE)),
    path("", include("finops.urls")),
]
