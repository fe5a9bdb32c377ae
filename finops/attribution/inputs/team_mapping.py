"""Who owns a line item or a job (DESIGN section 5.5): mapping rules, then conventions.

Line items: MappingRule TAG (tag key == value) and SUB_ACCOUNT rules in precedence order
(MappingRule.precedence: priority, then kind in DESIGN's order, then id); else the first of
settings.FINOPS_TEAM_TAG_KEYS present on the line names the team (Team.slug == slugify(value),
created with name = value when missing). A line owned this way is `tagged`; with no owner it
is `unallocated`.

Jobs: the job rules in priority order (lower first, then kind, then id), first match wins:
- SLURM_ACCOUNT (value == JobRecord.account) for Slurm jobs (jobs without a namespace);
- NAMESPACE (value == JobRecord.namespace) and LABEL (pod label `key` == value) for Kubernetes
  pods (jobs with a namespace).
Else the team whose slug is slugify(account), created with name = account when missing. A pod's
account is its `finops.io/team` or `team` label, else its namespace (billing_ingest parsers), so
an unmapped namespace becomes a team named after the team label, else after the namespace. A job
without an account has no team (its share is still `training`).

Resolution is memoised on the values that can matter (sub-account and the tag keys any rule or
convention reads), and teams to create are collected and created in one bulk insert, so the
number of queries does not grow with the number of rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.utils.text import slugify

from finops.org.models import MappingRule, Team

_SLUG_MAX = Team._meta.get_field("slug").max_length or 100
_NAME_MAX = Team._meta.get_field("name").max_length or 200


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    key: str
    value: str
    team_id: int


# A resolved owner before teams are created: an existing team id, or the slug of a team that
# may still have to be created.
TeamRef = int | str


def _tag_text(value: object) -> str | None:
    """Tag values are strings in every bill; JSON numbers and booleans compare as their text."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str | int | float):
        text = str(value).strip()
        return text or None
    return None


_LINE_KINDS = frozenset({MappingRule.Kind.TAG, MappingRule.Kind.SUB_ACCOUNT})
_JOB_KINDS = frozenset(
    {MappingRule.Kind.SLURM_ACCOUNT, MappingRule.Kind.NAMESPACE, MappingRule.Kind.LABEL}
)


def _job_rule_matches(
    rule: Rule, account: str, namespace: str, labels: Mapping[str, str | None]
) -> bool:
    if not namespace:
        # A Slurm job: only account rules speak about it.
        return rule.kind == MappingRule.Kind.SLURM_ACCOUNT and rule.value == account
    if rule.kind == MappingRule.Kind.NAMESPACE:
        return rule.value == namespace
    if rule.kind == MappingRule.Kind.LABEL:
        return labels.get(rule.key) == rule.value
    return False


class TeamResolver:
    def __init__(self, *, rules: Sequence[Rule], team_tag_keys: Sequence[str]) -> None:
        self._line_rules = [r for r in rules if r.kind in _LINE_KINDS]
        self._job_rules = [r for r in rules if r.kind in _JOB_KINDS]
        self._team_tag_keys = tuple(team_tag_keys)
        tag_keys = {r.key for r in self._line_rules if r.kind == MappingRule.Kind.TAG}
        self._read_keys = tuple(sorted(tag_keys | set(self._team_tag_keys)))
        # Pod label keys some LABEL rule reads: the only labels that can change a job's team.
        self._label_keys = tuple(
            sorted({r.key for r in self._job_rules if r.kind == MappingRule.Kind.LABEL})
        )
        self._line_memo: dict[tuple[object, ...], TeamRef | None] = {}
        self._job_memo: dict[tuple[object, ...], TeamRef | None] = {}
        # Slug -> name of teams named by a convention, resolved to ids by materialise().
        self._wanted: dict[str, str] = {}
        self._ids: dict[str, int] = {}

    @classmethod
    def from_db(cls) -> TeamResolver:
        rows = sorted(
            MappingRule.objects.values_list("id", "priority", "kind", "key", "value", "team_id"),
            key=lambda r: MappingRule.precedence(priority=r[1], kind=r[2], rule_id=r[0]),
        )
        rules = [Rule(kind, key, value, team_id) for _, _, kind, key, value, team_id in rows]
        return cls(rules=rules, team_tag_keys=settings.FINOPS_TEAM_TAG_KEYS)

    def line_team(self, *, tags: Mapping[str, object], sub_account: str) -> TeamRef | None:
        values = {key: _tag_text(tags.get(key)) for key in self._read_keys}
        memo_key = (sub_account, *(values[key] for key in self._read_keys))
        if memo_key not in self._line_memo:
            self._line_memo[memo_key] = self._resolve_line(values, sub_account)
        return self._line_memo[memo_key]

    def _resolve_line(self, values: Mapping[str, str | None], sub_account: str) -> TeamRef | None:
        for rule in self._line_rules:
            if rule.kind == MappingRule.Kind.TAG and values.get(rule.key) == rule.value:
                return rule.team_id
            if rule.kind == MappingRule.Kind.SUB_ACCOUNT and sub_account == rule.value:
                return rule.team_id
        for key in self._team_tag_keys:
            name = values.get(key)
            if name:
                ref = self._want(name)
                if ref is not None:
                    return ref
        return None

    def job_team(
        self, *, account: str, namespace: str = "", labels: Mapping[str, object] | None = None
    ) -> TeamRef | None:
        """The owner of a job: a Slurm job by its account; a Kubernetes pod (non-empty
        namespace) by its namespace and labels, then its account (team label or namespace)."""
        labels = labels or {}
        values = tuple(_tag_text(labels.get(key)) for key in self._label_keys)
        memo_key = (account, namespace, *values)
        if memo_key not in self._job_memo:
            self._job_memo[memo_key] = self._resolve_job(
                account, namespace, dict(zip(self._label_keys, values, strict=True))
            )
        return self._job_memo[memo_key]

    def _resolve_job(
        self, account: str, namespace: str, labels: Mapping[str, str | None]
    ) -> TeamRef | None:
        for rule in self._job_rules:
            if _job_rule_matches(rule, account, namespace, labels):
                return rule.team_id
        return self._want(account) if account else None

    def _want(self, name: str) -> str | None:
        slug = slugify(name)[:_SLUG_MAX]
        if not slug:
            return None  # nothing team-like in it ("---"): treat as no owner
        self._wanted.setdefault(slug, name.strip()[:_NAME_MAX])
        return slug

    def materialise(self) -> None:
        """Create the teams conventions named that do not exist yet (one bulk insert)."""
        if not self._wanted:
            return
        existing = dict(Team.objects.filter(slug__in=list(self._wanted)).values_list("slug", "id"))
        missing = [Team(slug=s, name=n) for s, n in self._wanted.items() if s not in existing]
        if missing:
            # ignore_conflicts: a team created concurrently (another run, an admin) is fine.
            Team.objects.bulk_create(missing, ignore_conflicts=True)
            existing = dict(
                Team.objects.filter(slug__in=list(self._wanted)).values_list("slug", "id")
            )
        self._ids = existing

    def team_id(self, ref: TeamRef | None) -> int | None:
        if ref is None or isinstance(ref, int):
            return ref
        return self._ids[ref]
