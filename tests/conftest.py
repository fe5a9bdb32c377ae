"""Fixtures shared across feature test files. Feature-specific fixtures live in their file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from finops.celery import app as celery_app
from finops.org.models import Profile, Team

SHARED_DIR = Path(__file__).resolve().parent.parent.parent / "shared"
SAMPLES_DIR = SHARED_DIR / "samples"


@pytest.fixture(autouse=True)
def celery_eager_unless_worker_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run tasks in-process, except in tests marked `worker`, which use a real worker.

    CI's PostgreSQL pass sets CELERY_BROKER_URL for the whole run; without this, every test
    that calls a command would wait on a worker that only the worker tests start.
    """
    eager = request.node.get_closest_marker("worker") is None
    previous = (celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates)
    celery_app.conf.task_always_eager = eager
    celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = previous


@pytest.fixture
def samples_dir() -> Path:
    """../shared/samples, or a clean skip where the checkout has no shared folder beside it."""
    if not SAMPLES_DIR.is_dir():
        pytest.skip("../shared/samples is absent")
    return SAMPLES_DIR


@pytest.fixture
def team(db: None) -> Team:
    return Team.objects.create(slug="vision", name="Vision")


@pytest.fixture
def other_team(db: None) -> Team:
    return Team.objects.create(slug="speech", name="Speech")


@pytest.fixture
def finance_user(db: None) -> User:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    return user


@pytest.fixture
def lead_user(team: Team) -> User:
    user = User.objects.create_user("lead", password="lead-password-123")
    profile = Profile.objects.create(user=user, role=Profile.Role.TEAM_LEAD)
    profile.teams.add(team)
    return user
