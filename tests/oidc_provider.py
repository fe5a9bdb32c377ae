"""npm's `oidc-provider` (a certified OpenID Connect implementation) as the company's identity
provider in the SSO tests: tests/oidc/provider.mjs, installed under .oidc/ by `make oidc`.
Without node or the package these tests skip, unless FINOPS_REQUIRE_OIDC=1 (CI): then they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from finops.org.sso_discovery import provider_endpoints
from tests.conftest import free_port

PROJECT = Path(__file__).resolve().parent.parent
SCRIPT = PROJECT / "tests" / "oidc" / "provider.mjs"
PACKAGE = PROJECT / ".oidc" / "node_modules" / "oidc-provider" / "lib" / "index.js"
ACCOUNTS = PROJECT / "fixtures" / "oidc" / "accounts.json"
CLIENT_ID = "finops-test"
CLIENT_SECRET = "finops-test-client-secret-0123456789"


@dataclass(frozen=True)
class Provider:
    issuer: str
    redirect_uri: str


def _unavailable(reason: str) -> None:
    if os.environ.get("FINOPS_REQUIRE_OIDC") == "1":
        pytest.fail(f"FINOPS_REQUIRE_OIDC=1 but {reason}")
    pytest.skip(reason)


@contextmanager
def oidc_provider(site_url: str) -> Iterator[Provider]:
    """The provider on a free port, with one client whose redirect URI is on `site_url`."""
    node = shutil.which("node")
    if node is None or not PACKAGE.exists():
        _unavailable("node or .oidc/node_modules/oidc-provider is not installed (make oidc)")
    assert node is not None
    port = free_port()
    redirect_uri = f"{site_url}/oidc/callback/"
    process = subprocess.Popen(
        [node, str(SCRIPT), str(port), str(ACCOUNTS), CLIENT_ID, CLIENT_SECRET, redirect_uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("ready "):
            process.kill()
            error = process.stderr.read() if process.stderr else ""
            _unavailable(f"oidc-provider did not start: {line!r} {error!r}")
        yield Provider(issuer=line.split()[1], redirect_uri=redirect_uri)
    finally:
        process.terminate()
        process.wait(timeout=10)


def sso_settings(settings: Any, provider: Provider) -> None:
    """Point the site's SSO at the provider (the endpoints its discovery document lists)."""
    for name, value in provider_endpoints(provider.issuer).settings.items():
        setattr(settings, name, value)
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET


_FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)"')


def sso_login(site_url: str, login: str, password: str) -> tuple[requests.Session, str]:
    """Sign in as a browser would, with requests following every redirect: the site's SSO
    link -> the provider's sign-in form -> (post) -> back to the site's callback -> a page.
    Returns the session (holding the site's cookie) and the URL it ended on."""
    session = requests.Session()
    form_page = session.get(f"{site_url}/oidc/authenticate/", timeout=30)
    form_page.raise_for_status()
    match = _FORM_ACTION.search(form_page.text)
    assert match, f"no sign-in form at {form_page.url}: {form_page.text[:300]}"
    action = requests.compat.urljoin(form_page.url, match.group(1))
    landed = session.post(action, data={"login": login, "password": password}, timeout=30)
    return session, landed.url
