"""Idle policies and shared-cost rules as the attribution service applies them (DESIGN 5.4, 5.5).

Rules are read once per run into plain values; matching is memoised, so the cost per line item
or node is a dict lookup. The splitting itself is in the engine (pure, exact).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from finops.attribution import engine
from finops.attribution.inputs.catalogue import normalise_instance_type
from finops.attribution.models import IdlePolicy, SharedCostRule, SharedCostSplit

# FIXED percentages become integer weights in millionths of a percent (the field has 6 places).
_PERCENT_SCALE = Decimal(10**6)


@dataclass(frozen=True, slots=True)
class NodeIdle:
    """How one node's idle is booked: owner for keep/platform, pool for spread."""

    policy: str
    # keep / spread fallback: the owner team, None meaning the node line's own owner.
    # platform: the platform team, None meaning no team.
    team_id: int | None
    pool: str | None = None

    def idle_owner(self, line_team_id: int | None) -> int | None:
        if self.policy == IdlePolicy.Policy.PLATFORM:
            return self.team_id
        return self.team_id if self.team_id is not None else line_team_id


_DEFAULT = NodeIdle(IdlePolicy.Policy.KEEP, None)


@dataclass(frozen=True, slots=True)
class _IdleRule:
    id: int
    cluster: str
    prefix: str
    policy: str
    team_id: int | None


class IdlePolicies:
    def __init__(self, rules: Sequence[_IdleRule], node_clusters: dict[str, str]) -> None:
        self._rules = list(rules)
        self._clusters = node_clusters
        self._memo: dict[str, NodeIdle] = {}

    @classmethod
    def from_db(cls, node_clusters: dict[str, str]) -> IdlePolicies:
        rules = [
            _IdleRule(*row)
            for row in IdlePolicy.objects.order_by("priority", "id").values_list(
                "id", "cluster", "node_prefix", "policy", "owner_team_id"
            )
        ]
        return cls(rules, node_clusters)

    def for_node(self, node: str) -> NodeIdle:
        if node not in self._memo:
            self._memo[node] = self._resolve(node)
        return self._memo[node]

    def _resolve(self, node: str) -> NodeIdle:
        cluster = self._clusters.get(node, "")
        for rule in self._rules:
            if rule.cluster and rule.cluster != cluster:
                continue
            if rule.prefix and not node.startswith(rule.prefix):
                continue
            pool = None
            if rule.policy == IdlePolicy.Policy.SPREAD:
                # A prefix rule is a pool of its own; otherwise the pool is the cluster.
                pool = f"rule:{rule.id}" if rule.prefix else f"rule:{rule.id}:cluster:{cluster}"
            return NodeIdle(rule.policy, rule.team_id, pool)
        return _DEFAULT


def node_clusters(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Node -> the cluster of the jobs that ran on it: from (node, cluster) pairs, one per job
    and node. A node name that appears in two clusters' logs takes the one with more jobs there
    (then the first name), so the result does not depend on row order."""
    # One count of the pairs (a Counter per pair made 300k Counters at 1,000 nodes), then per
    # node the cluster with most jobs, then the first name; nodes in order of first appearance.
    best: dict[str, tuple[int, str]] = {}
    for (node, cluster), count in Counter(pairs).items():
        current = best.get(node)
        if current is None or (-count, cluster) < (-current[0], current[1]):
            best[node] = (count, cluster)
    return {node: cluster for node, (_, cluster) in best.items()}


@dataclass(frozen=True, slots=True)
class _SharedRule:
    # (provider, sub-account, service category, service name, charge category), casefolded;
    # "" matches anything.
    match: tuple[str, str, str, str, str]
    rule: engine.SharedRule


class SharedRules:
    def __init__(self, rules: Sequence[_SharedRule]) -> None:
        self._rules = list(rules)
        self._memo: dict[tuple[str, str, str, str, str], engine.SharedRule | None] = {}

    @classmethod
    def from_db(cls) -> SharedRules:
        splits: dict[int, list[tuple[int, int]]] = {}
        for rule_id, team_id, percent in SharedCostSplit.objects.order_by(
            "rule_id", "team_id"
        ).values_list("rule_id", "team_id", "percent"):
            splits.setdefault(rule_id, []).append((team_id, int(percent * _PERCENT_SCALE)))
        rules = []
        for row in SharedCostRule.objects.order_by("priority", "id").values_list(
            "id", "provider_name", "sub_account_id", "service_category", "service_name",
            "charge_category", "method",
        ):  # fmt: skip
            rule_id, *fields, method = row
            match = tuple(str(f).strip().casefold() for f in fields)
            fixed = tuple(splits.get(rule_id, ())) if method == engine.FIXED else ()
            rules.append(_SharedRule(match, engine.SharedRule(method, fixed)))  # type: ignore[arg-type]
        return cls(rules)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def match(
        self,
        *,
        provider: str,
        sub_account: str,
        service_category: str,
        service_name: str,
        charge_category: str,
    ) -> engine.SharedRule | None:
        values = (provider, sub_account, service_category, service_name, charge_category)
        key = tuple(v.strip().casefold() for v in values)
        if key not in self._memo:
            self._memo[key] = next(  # type: ignore[index]
                (
                    r.rule
                    for r in self._rules
                    if all(
                        not want or want == have for want, have in zip(r.match, key, strict=True)
                    )
                ),
                None,
            )
        return self._memo[key]  # type: ignore[index]


def is_unused_commitment(status: str) -> bool:
    """A line of commitment nobody used: CommitmentDiscountStatus `Unused` (FOCUS; the AWS CUR
    parser sets it on RIFee / SavingsPlanRecurringFee, the Azure one on UnusedReservation /
    UnusedSavingsPlan rows)."""
    return status.strip().casefold() == "unused"


class CommitmentPools:
    """The GPU nodes an unused commitment is idle capacity of (issue 13).

    An unused commitment is bought capacity that sat idle, so it follows the idle policy of the
    pool it was bought for: first the nodes whose usage the same commitment covered this month,
    else the nodes of the same provider and instance type. Among several, the first node by name
    stands for the pool, so the answer never depends on row order. None: no pool to tie it to,
    and it stays idle of its own owner (a platform idle bucket when it has none)."""

    def __init__(self) -> None:
        self._by_commitment: dict[str, set[str]] = {}
        self._by_type: dict[tuple[str, str], set[str]] = {}

    def add_node_line(
        self, *, node: str, commitment_id: str, provider: str, instance_type: str
    ) -> None:
        if commitment_id:
            self._by_commitment.setdefault(commitment_id, set()).add(node)
        if instance_type:
            key = (provider.casefold(), normalise_instance_type(instance_type))
            self._by_type.setdefault(key, set()).add(node)

    def node_for(self, *, commitment_id: str, provider: str, instance_type: str) -> str | None:
        nodes = self._by_commitment.get(commitment_id) if commitment_id else None
        if not nodes and instance_type:
            key = (provider.casefold(), normalise_instance_type(instance_type))
            nodes = self._by_type.get(key)
        return min(nodes) if nodes else None

    def idle_of(
        self, policies: IdlePolicies, *, commitment_id: str, provider: str, instance_type: str
    ) -> NodeIdle:
        node = self.node_for(
            commitment_id=commitment_id, provider=provider, instance_type=instance_type
        )
        return _DEFAULT if node is None else policies.for_node(node)
