"""The demo organisation: teams, a finance user, a team lead, and mapping rules, read from
fixtures/django/demo_organisation.json.

Idempotent: running it again updates in place and never duplicates teams, users or rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core import serializers
from django.db import transaction
from django.db.models import Field, Model

from billing_ingest.models import CoreWeaveRate
from finops.attribution.models import SharedCostRule
from finops.demo.export_coreweave import ContractRate
from finops.demo.teams import TEAMS
from finops.org.models import MappingRule, Profile, Team

FINANCE_USERNAME = "finance"
LEAD_USERNAME = "lead"
# Sees what finance sees and changes nothing (Profile.Role.VIEWER).
VIEWER_USERNAME = "viewer"
# Teams, users (no passwords), the lead's teams, mapping rules and the shared-cost rule (GCP's
# committed use discount fee, shared pro rata to GPU spend on Google Cloud): a Django fixture,
# so tests and `manage.py loaddata demo_organisation` read the same organisation.
DEMO_FIXTURE = Path(settings.BASE_DIR) / "fixtures" / "django" / "demo_organisation.json"
# The fields each model is found by when the demo runs again (update in place, never duplicate).
_LOOKUP_FIELDS: dict[type[Model], tuple[str, ...]] = {
    Team: ("slug",),
    User: ("username",),
    Profile: ("user",),
    MappingRule: ("kind", "key", "value"),
    SharedCostRule: ("name",),
}


@dataclass(frozen=True)
class DemoOrganisation:
    teams: dict[str, Team]
    finance: User
    lead: User
    viewer: User | None


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, Field), f"{model.__name__}.{name} is not a field of its own"
    return field


def _object_ensure(entry: dict[str, Any]) -> None:
    """One fixture entry, created or updated in place by its lookup fields. Only the fields the
    fixture names are written; `auto_now_add` ones keep the database's value."""
    (deserialized,) = serializers.deserialize("json", json.dumps([entry]))
    obj = deserialized.object
    model = type(obj)
    fields = [_field(model, name) for name in entry["fields"]]
    values = {
        f.attname: getattr(obj, f.attname)
        for f in fields
        if not f.many_to_many and not getattr(f, "auto_now_add", False)
    }
    lookup = {}
    for name in _LOOKUP_FIELDS[model]:
        attname = _field(model, name).attname
        lookup[attname] = values.pop(attname)
    saved, _ = model._default_manager.update_or_create(**lookup, defaults=values)
    for name, pks in (deserialized.m2m_data or {}).items():
        getattr(saved, name).set(pks)


def _password_set(*, username: str, password: str) -> User:
    user = User.objects.get(username=username)
    user.set_password(password)
    user.save(update_fields=["password"])
    return user


@transaction.atomic
def demo_organisation_ensure(
    *, finance_password: str, lead_password: str, viewer_password: str | None = None
) -> DemoOrganisation:
    # In file order: a rule's team and a profile's user exist before the entry naming them.
    for entry in json.loads(DEMO_FIXTURE.read_text(encoding="utf-8")):
        _object_ensure(entry)
    teams = {team.slug: team for team in Team.objects.filter(slug__in=[t.slug for t in TEAMS])}
    finance = _password_set(username=FINANCE_USERNAME, password=finance_password)
    lead = _password_set(username=LEAD_USERNAME, password=lead_password)
    viewer = None
    if viewer_password is not None:
        viewer = _password_set(username=VIEWER_USERNAME, password=viewer_password)
    return DemoOrganisation(teams=teams, finance=finance, lead=lead, viewer=viewer)


@transaction.atomic
def coreweave_rates_ensure(*, rates: list[ContractRate], first: date, last: date) -> int:
    """The contract rate card the CoreWeave usage is priced with, valid for the demo month."""
    for rate in rates:
        CoreWeaveRate.objects.update_or_create(
            instance_type=rate.instance_type, pricing_category=rate.pricing_category,
            currency="USD", valid_from=first,
            defaults={"rate": Decimal(rate.rate), "unit": rate.unit, "valid_to": last},
        )  # fmt: skip
    return len(rates)
