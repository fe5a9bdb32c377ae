"""Who owns spend: teams, the people who look at it, and the rules that map cost to teams."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TeamManager(models.Manager["Team"]):
    def get_by_natural_key(self, slug: str) -> Team:
        return self.get(slug=slug)


class Team(models.Model):
    """Natural key: the slug, so Django fixtures (fixtures/django/) name teams, not ids."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamManager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def natural_key(self) -> tuple[str]:
        return (self.slug,)


class Profile(models.Model):
    """A user's role: finance sees every team and edits the configuration; a viewer sees what
    finance sees and edits nothing; a team lead sees only the teams listed."""

    class Role(models.TextChoices):
        FINANCE = "finance"
        TEAM_LEAD = "team_lead"
        VIEWER = "viewer", "Viewer (read-only)"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="finops_profile"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.TEAM_LEAD)
    teams = models.ManyToManyField(Team, blank=True, related_name="leads")

    def __str__(self) -> str:
        return f"{self.user} ({self.role})"


class MappingRule(models.Model):
    """Maps a line item or a job to a team. Lower priority numbers are tried first."""

    class Kind(models.TextChoices):
        TAG = "tag", "Tag key = value"
        SUB_ACCOUNT = "sub_account", "Sub-account id"
        SLURM_ACCOUNT = "slurm_account", "Slurm account"
        NAMESPACE = "namespace", "Kubernetes namespace"
        LABEL = "label", "Kubernetes pod label key = value"

    # Kinds whose rule reads key=value rather than a single value.
    KEYED_KINDS = frozenset({Kind.TAG, Kind.LABEL})
    # At equal priority, rules apply in this order of kinds (DESIGN 5.5: tag, sub-account, Slurm
    # account, namespace, label), then oldest first: the default priority alone then gives the
    # documented precedence, and an explicit priority still overrides it.
    KIND_ORDER = (Kind.TAG, Kind.SUB_ACCOUNT, Kind.SLURM_ACCOUNT, Kind.NAMESPACE, Kind.LABEL)

    kind = models.CharField(max_length=32, choices=Kind.choices)
    # Tag key for TAG rules, label key for LABEL rules; unused for the others.
    key = models.CharField(max_length=200, blank=True)
    value = models.CharField(max_length=500)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="mapping_rules")
    priority = models.IntegerField(default=100)

    class Meta:
        ordering = ["priority", "id"]

    def __str__(self) -> str:
        target = f"{self.key}={self.value}" if self.kind in self.KEYED_KINDS else self.value
        return f"{self.kind}:{target} -> {self.team.slug}"

    @classmethod
    def precedence(cls, *, priority: int, kind: str, rule_id: int) -> tuple[int, int, int]:
        """Sort key of a rule: lower applies first."""
        rank = (
            cls.KIND_ORDER.index(cls.Kind(kind)) if kind in cls.Kind.values else len(cls.KIND_ORDER)
        )
        return (priority, rank, rule_id)


# The one DataVersion row.
DATA_VERSION_PK = 1


class DataVersion(models.Model):
    """One row: a number bumped after every commit that changes what the reports show (a
    pipeline step, an attribution run, FX rates, budgets, teams). Cached API answers are keyed
    by it (finops/api/cache.py), so a new number makes every older cached answer unreachable.
    In the database, not the cache, so a Celery worker's bump reaches every web process even
    when each process has its own (locmem) cache."""

    number = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"data version {self.number}"


class SsoRule(models.Model):
    """What a claim of the company's OpenID provider grants at sign-in (finops.org.sso): when
    the claim (a string or a list, e.g. "groups") holds the value, the person gets the role,
    and for a team lead the team. Finance edits these (onboarding page, admin). Of all the
    rules a person matches, the highest role wins (finance, then viewer, then team lead, whose
    teams are every team of the matching team-lead rules); matching none refuses the sign-in."""

    claim = models.CharField(max_length=100, default="groups")
    value = models.CharField(max_length=500)
    role = models.CharField(max_length=16, choices=Profile.Role.choices)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="sso_rules"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["claim", "value", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(role="team_lead") & models.Q(team__isnull=False))
                | (~models.Q(role="team_lead") & models.Q(team__isnull=True)),
                name="ssorule_team_iff_team_lead",
            ),
            models.UniqueConstraint(
                fields=["claim", "value", "role", "team"], name="ssorule_unique"
            ),
        ]

    def __str__(self) -> str:
        target = f" of {self.team.slug}" if self.team is not None else ""
        return f"{self.claim} has {self.value!r} -> {self.role}{target}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        if self.role == Profile.Role.TEAM_LEAD and self.team_id is None:
            raise ValidationError({"team": "A team-lead rule names the team the lead owns."})
        if self.role != Profile.Role.TEAM_LEAD and self.team_id is not None:
            raise ValidationError({"team": "Only a team-lead rule names a team."})
