"""A web process loads the URLconf and parses the page templates when finops/wsgi.py is
imported (finops/warmup.py), so its first request does not (issue 29, h-pages: the overview's
first view in a fresh process 0.74-0.77 s -> 0.15-0.25 s on the two-month demo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from finops.warmup import page_templates, warm_up

ROOT = Path(__file__).resolve().parent.parent.parent

# Run in a fresh interpreter: this test process has long since loaded both.
PROBE = """
import finops.wsgi
from django.template import engines
from django.urls import get_resolver
loader = engines["django"].engine.template_loaders[0]
print(get_resolver()._populated, sorted(loader.get_template_cache))
"""


def test_importing_the_wsgi_module_warms_the_urlconf_and_the_page_templates() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "finops.settings"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
        check=True, timeout=120,
    )  # fmt: skip
    populated, cached = done.stdout.strip().split(" ", 1)
    assert populated == "True"
    for name in ("base.html", "web/overview.html", "web/team.html", "web/statement.html"):
        assert f"'{name}'" in cached, (name, cached)


def test_every_page_template_parses() -> None:
    names = page_templates()
    assert "web/overview.html" in names
    assert warm_up() == names
