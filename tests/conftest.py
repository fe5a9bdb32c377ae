"""Fixtures shared across feature test files. Feature-specific fixtures live in their file."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from finops.org.models import Profile, Team

SHARED_DIR = Path(__file__).resolve().parent.parent.parent / "shared"
SAMPLES_DIR = SHARED_DIR / "samples"


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
