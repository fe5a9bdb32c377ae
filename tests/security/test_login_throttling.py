"""Login lockout and token-failure throttling (issue 9, item 4).

The probe's repro: 100 wrong passwords in 40 s, then the right one worked. Now, after
AXES_FAILURE_LIMIT wrong passwords for a username from one address, that pair's logins (the
right password too) are refused with a clear page for AXES_COOLOFF_TIME; and after the
token_failure rate of wrong API tokens from one address, its token attempts get 429.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import cast

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from selenium.webdriver.remote.webdriver import WebDriver

from tests.chromium import _body, _wait_for_text
from tests.client_types import Response

pytestmark = pytest.mark.django_db

LIMIT = settings.AXES_FAILURE_LIMIT
RIGHT = "fin-password-123"


@pytest.fixture(autouse=True)
def clean_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def _login(client: Client, password: str, username: str = "fin") -> Response:
    return client.post(reverse("login"), {"username": username, "password": password})


def _logged_in(client: Client) -> bool:
    return client.get(reverse("web:overview")).status_code == 200


def test_right_password_is_refused_after_the_limit_with_a_clear_message(finance_user: User) -> None:
    client = Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(LIMIT):
        assert _login(client, "wrong-guess").status_code in (200, 429)

    response = _login(client, RIGHT)

    assert response.status_code == 429
    text = response.content.decode()
    assert "Too many failed logins" in text
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    assert f"about {minutes} minutes" in text
    assert "right password is refused" in text
    assert not _logged_in(client)


def test_lockout_ends_after_the_cool_off(finance_user: User) -> None:
    client = Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(LIMIT):
        _login(client, "wrong-guess")
    assert _login(client, RIGHT).status_code == 429
    # Let the cool-off pass: the attempts are older than it.
    past = dt.datetime.now(dt.UTC) - settings.AXES_COOLOFF_TIME - dt.timedelta(seconds=1)
    AccessAttempt.objects.update(attempt_time=past)

    response = _login(client, RIGHT)

    assert response.status_code == 302
    assert _logged_in(client)


def test_fewer_failures_than_the_limit_still_let_the_right_password_in(finance_user: User) -> None:
    client = Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(LIMIT - 1):
        assert _login(client, "wrong-guess").status_code == 200
    assert _login(client, RIGHT).status_code == 302


def test_the_lock_is_per_username_and_address(finance_user: User, lead_user: User) -> None:
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(LIMIT):
        _login(attacker, "wrong-guess")
    assert _login(attacker, RIGHT).status_code == 429
    # The real user elsewhere is not locked out by a stranger's guesses.
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert _login(elsewhere, RIGHT).status_code == 302
    # Nor is another account from the attacker's address.
    assert _login(attacker, "lead-password-123", username="lead").status_code == 302


def test_admin_login_is_locked_too(finance_user: User) -> None:
    client = Client(REMOTE_ADDR="198.51.100.7")
    url = reverse("admin:login")
    for _ in range(LIMIT):
        client.post(url, {"username": "fin", "password": "wrong-guess"})
    assert client.post(url, {"username": "fin", "password": RIGHT}).status_code == 429


def _token_rate() -> int:
    rates = cast(dict[str, str], settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"])
    return int(rates["token_failure"].split("/")[0])


def test_wrong_tokens_are_throttled_but_a_good_token_still_works(finance_user: User) -> None:
    # Issue 25 item 2: once an address was throttled, a valid token from it got 429 too.
    good = Token.objects.create(user=finance_user).key
    api = APIClient(REMOTE_ADDR="203.0.113.9")
    for i in range(_token_rate()):
        response = api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token wrong{i:036d}")
        assert response.status_code in (401, 403), i

    blocked = api.get("/api/v1/teams/", HTTP_AUTHORIZATION="Token wrong-once-more")

    assert blocked.status_code == 429
    assert "Too many failed token attempts" in blocked.json()["detail"]
    assert int(blocked["Retry-After"]) > 0
    # A valid token from the same address is not throttled.
    assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {good}").status_code == 200
    # Another address is not affected.
    other = APIClient(REMOTE_ADDR="198.51.100.7")
    assert other.get("/api/v1/teams/", HTTP_AUTHORIZATION="Token wrong").status_code == 401


def test_forwarded_for_is_ignored_without_proxies(finance_user: User) -> None:
    # Issue 25 item 2: with FINOPS_PROXY_COUNT=0, 40 bad tokens each with another
    # X-Forwarded-For all got 401, none 429.
    assert settings.FINOPS_PROXY_COUNT == 0
    api = APIClient(REMOTE_ADDR="203.0.113.9")
    codes = [
        api.get(
            "/api/v1/teams/",
            HTTP_AUTHORIZATION=f"Token wrong{i:036d}",
            HTTP_X_FORWARDED_FOR=f"10.0.{i // 256}.{i % 256}",
        ).status_code
        for i in range(2 * _token_rate())
    ]

    assert codes[: _token_rate()] == [401] * _token_rate()
    assert codes[_token_rate() :] == [429] * _token_rate()


def test_behind_proxies_the_forwarded_address_is_the_clients(
    finance_user: User, settings: Settings
) -> None:
    settings.FINOPS_PROXY_COUNT = 1
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = APIClient(REMOTE_ADDR="10.0.0.1")  # every request comes through our one proxy
    for i in range(_token_rate()):
        # The forged left-hand entry changes; the one our proxy appended does not.
        xff = f"192.0.2.{i}, 203.0.113.9"
        response = proxy.get(
            "/api/v1/teams/", HTTP_AUTHORIZATION="Token wrong", HTTP_X_FORWARDED_FOR=xff
        )
        assert response.status_code == 401, i
    blocked = proxy.get(
        "/api/v1/teams/", HTTP_AUTHORIZATION="Token wrong", HTTP_X_FORWARDED_FOR="203.0.113.9"
    )
    assert blocked.status_code == 429
    # Another client through the same proxy is not blocked.
    other = proxy.get(
        "/api/v1/teams/", HTTP_AUTHORIZATION="Token wrong", HTTP_X_FORWARDED_FOR="198.51.100.7"
    )
    assert other.status_code == 401


def test_login_lockout_ignores_forwarded_for_without_proxies(finance_user: User) -> None:
    client = Client(REMOTE_ADDR="198.51.100.7")
    for i in range(LIMIT):
        client.post(
            reverse("login"),
            {"username": "fin", "password": "wrong-guess"},
            HTTP_X_FORWARDED_FOR=f"10.1.0.{i}",
        )
    response = client.post(
        reverse("login"), {"username": "fin", "password": RIGHT}, HTTP_X_FORWARDED_FOR="10.9.9.9"
    )
    assert response.status_code == 429


def test_login_lockout_behind_proxies_is_per_client(finance_user: User, settings: Settings) -> None:
    # Behind a proxy every login comes from its address: the lock must be the client's, so one
    # client's wrong passwords do not lock out everyone else behind the proxy.
    settings.FINOPS_PROXY_COUNT = 1
    proxy = Client(REMOTE_ADDR="10.0.0.1")
    for _ in range(LIMIT):
        _login_from(proxy, "wrong-guess", "203.0.113.9")
    assert _login_from(proxy, RIGHT, "203.0.113.9").status_code == 429
    assert _login_from(proxy, RIGHT, "198.51.100.7").status_code == 302


def _login_from(client: Client, password: str, forwarded_for: str) -> Response:
    return client.post(
        reverse("login"),
        {"username": "fin", "password": password},
        HTTP_X_FORWARDED_FOR=f"192.0.2.1, {forwarded_for}",
    )


def test_good_tokens_are_never_counted(finance_user: User) -> None:
    good = Token.objects.create(user=finance_user).key
    api = APIClient(REMOTE_ADDR="203.0.113.9")
    for _ in range(_token_rate() + 5):
        assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {good}").status_code == 200


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_browser_shows_the_lockout_page(
    browser: WebDriver, live_server: LiveServer, finance_user: User
) -> None:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def attempt(password: str) -> None:
        browser.get(live_server.url + "/accounts/login/")
        browser.find_element(By.ID, "id_username").send_keys("fin")
        browser.find_element(By.ID, "id_password").send_keys(password)
        browser.execute_script("window.finopsOldPage = true;")
        browser.find_element(By.ID, "login-submit").click()
        # Wait for the answer (a new document), so the next page load cannot cancel this POST.
        WebDriverWait(browser, 15, ignored_exceptions=(WebDriverException,)).until(
            lambda d: d.execute_script(
                "return !window.finopsOldPage && document.readyState === 'complete';"
            )
        )

    for _ in range(LIMIT):
        attempt("wrong-guess")
    attempt(RIGHT)
    _wait_for_text(browser, "Too many failed logins")
    body = _body(browser)
    assert "Try again in" in body
    assert "right password is refused" in body
    assert "Attributed cost" not in body
