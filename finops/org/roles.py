"""Roles as Django groups, so the admin's own permission checks enforce them.

- "Finance": add/change/delete/view on the configuration models (rules, policies, billing
  sources, rates, prices) and view on the data finance inspects there.
- "Viewer": view on all of those.
A profile's role decides its user's group and whether they may open the admin (is_staff):
finance and viewers may, team leads may not. Superusers are left as they are.

The groups are (re)built after every `migrate` (post_migrate), so a model added to the lists
below gets its permissions in every deployment without a data migration per change; the lists
name models by label and skip those not installed.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission
from django.db import transaction

from finops.org.models import Profile

FINANCE_GROUP = "Finance"
VIEWER_GROUP = "Viewer"

# Configuration finance edits in the admin.
FINANCE_EDITS = (
    "org.mappingrule",
    "org.ssorule",
    "attribution.idlepolicy",
    "attribution.chargebasis",
    "attribution.sharedcostrule",
    "attribution.sharedcostsplit",
    "billing_ingest.billingsource",
    "billing_ingest.coreweaverate",
    "billing_ingest.cluster",
    "currency.fxrate",
    "pricing.skuprice",
    "budgets.budget",
)
# Data finance may look at in the admin, never change there.
FINANCE_VIEWS = (
    "org.team",
    "attribution.allocatedcost",
    "attribution.runcost",
    "attribution.teamdailycost",
    "attribution.attributionrun",
    "billing_ingest.importbatch",
    "billing_ingest.kubernetessource",
    "notifications.emailnotification",
    "chargeback.closedperiod",
    "audit.auditevent",
)
_ALL_ACTIONS = ("add", "change", "delete", "view")


def _permissions(labels: tuple[str, ...], actions: tuple[str, ...]) -> list[Permission]:
    wanted = set()
    for label in labels:
        app_label, model = label.split(".")
        wanted |= {(app_label, f"{action}_{model}") for action in actions}
    found = Permission.objects.filter(
        content_type__app_label__in={a for a, _ in wanted},
        codename__in={c for _, c in wanted},
    ).select_related("content_type")
    return [p for p in found if (p.content_type.app_label, p.codename) in wanted]


@transaction.atomic
def role_groups_ensure() -> tuple[Group, Group]:
    """Create or update the Finance and Viewer groups with exactly their permissions."""
    finance, _ = Group.objects.get_or_create(name=FINANCE_GROUP)
    finance.permissions.set(
        _permissions(FINANCE_EDITS, _ALL_ACTIONS) + _permissions(FINANCE_VIEWS, ("view",))
    )
    viewer, _ = Group.objects.get_or_create(name=VIEWER_GROUP)
    viewer.permissions.set(_permissions(FINANCE_EDITS + FINANCE_VIEWS, ("view",)))
    return finance, viewer


def role_groups_ensure_once() -> tuple[Group, ...]:
    """The two groups; built here when no migrate built them (a test without migrations)."""
    groups = tuple(Group.objects.filter(name__in=[FINANCE_GROUP, VIEWER_GROUP]))
    return groups if len(groups) == 2 else role_groups_ensure()


@transaction.atomic
def profile_role_apply(*, profile: Profile) -> None:
    """Put the profile's user in their role's group (only), and let finance and viewers open
    the admin. Team leads lose both: they see their teams in the pages, never the admin."""
    user = profile.user
    if user.is_superuser:
        return
    groups = dict(
        Group.objects.filter(name__in=[FINANCE_GROUP, VIEWER_GROUP]).values_list("name", "pk")
    )
    if len(groups) < 2:
        role_groups_ensure()
        groups = dict(
            Group.objects.filter(name__in=[FINANCE_GROUP, VIEWER_GROUP]).values_list("name", "pk")
        )
    wanted = {
        Profile.Role.FINANCE: FINANCE_GROUP,
        Profile.Role.VIEWER: VIEWER_GROUP,
    }.get(Profile.Role(profile.role))
    user.groups.remove(*[pk for name, pk in groups.items() if name != wanted])
    if wanted:
        user.groups.add(groups[wanted])
    staff = wanted is not None
    if user.is_staff != staff:
        user.is_staff = staff
        user.save(update_fields=["is_staff"])


def _on_post_migrate(**kwargs: Any) -> None:
    role_groups_ensure()


def _on_profile_saved(sender: type[Profile], instance: Profile, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return
    profile_role_apply(profile=instance)
