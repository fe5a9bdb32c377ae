"""Password rules and the demo logins (issue 9, item 8).

Passwords people choose must be 12+ characters, not mostly the user's name, not common, not
all digits. `demo` creates logins with public names and default passwords: on a database other
than the embedded SQLite it refuses unless --allow-demo-users, and it says where each password
came from.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections

from finops.demo.management.commands.demo import demo_password

pytestmark = pytest.mark.django_db

GOOD = "violet-anchor-harbour-42"


@pytest.fixture
def person() -> User:
    return User.objects.create_user("margaret.hamilton", email="margaret@example.com")


@pytest.mark.parametrize(
    ("password", "code"),
    [
        ("short-pw-1", "password_too_short"),  # 10 characters
        ("839201746251930", "password_entirely_numeric"),
        ("password12345", "password_too_common"),
        ("margaret.hamilton", "password_too_similar"),
    ],
)
def test_weak_passwords_are_refused(person: User, password: str, code: str) -> None:
    with pytest.raises(ValidationError) as error:
        validate_password(password, user=person)
    assert code in {e.code for e in error.value.error_list}


def test_a_long_uncommon_password_is_accepted(person: User) -> None:
    validate_password(GOOD, user=person)  # no error
    assert len("eleven-char") == 11
    with pytest.raises(ValidationError):
        validate_password("eleven-char", user=person)


def test_the_password_form_applies_the_rules(person: User) -> None:
    form = SetPasswordForm(person, {"new_password1": "short-pw-1", "new_password2": "short-pw-1"})
    assert not form.is_valid()
    assert "at least 12 characters" in str(form.errors)
    ok = SetPasswordForm(person, {"new_password1": GOOD, "new_password2": GOOD})
    assert ok.is_valid()


def test_code_and_tests_may_still_create_users_with_short_passwords() -> None:
    # Validators apply to what people type, not to create_user (fixtures use short ones).
    assert User.objects.create_user("t", password="pw").check_password("pw")


@pytest.fixture
def non_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections["default"], "vendor", "postgresql")


def test_demo_refuses_demo_logins_on_another_database(non_sqlite: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--allow-demo-users"):
        call_command("demo", "--scale", "small", "--out", str(tmp_path), stdout=io.StringIO())
    assert not User.objects.filter(username__in=["finance", "lead"]).exists()
    assert not any(tmp_path.iterdir())  # refused before writing anything


def test_demo_files_only_needs_no_permission(non_sqlite: None, tmp_path: Path) -> None:
    call_command("demo", "--scale", "small", "--month", "2025-10", "--out", str(tmp_path),
                 "--files-only", stdout=io.StringIO())  # fmt: skip
    assert any(tmp_path.iterdir())
    assert not User.objects.filter(username__in=["finance", "lead"]).exists()


def test_demo_says_where_each_password_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEMO_FINANCE_PASSWORD", raising=False)
    password, source = demo_password("DEMO_FINANCE_PASSWORD", "finance-demo")
    assert password == "finance-demo"
    assert "public default" in source
    assert "DEMO_FINANCE_PASSWORD" in source

    monkeypatch.setenv("DEMO_FINANCE_PASSWORD", GOOD)
    password, source = demo_password("DEMO_FINANCE_PASSWORD", "finance-demo")
    assert password == GOOD
    assert source == "password from DEMO_FINANCE_PASSWORD"
    assert GOOD not in source
