"""Attribution inputs, the line items' side: the first pass over a month's line items
(LineStager: node and GPUs, on-demand equivalent, ledger dimensions, owner reference, unused
commitment and shared-cost rule of each line), then, once the teams exist, the engine's lines
(engine_lines). month.py reads the rows and calls both.

Everything but a line's amounts and period is its billed resource's (a node bills 744 lines a
month alike): that part is resolved once per distinct resource, and the per-line work is a
tuple made by one C call, a few dict lookups and the engine value itself.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from operator import itemgetter
from typing import Any

from django.db import connections

from billing_ingest.models import CostLineItem
from finops.attribution import engine
from finops.attribution.inputs.catalogue import line_gpu_spec
from finops.attribution.inputs.charge_rollups import ChargeSums
from finops.attribution.inputs.jobs import to_datetime, to_epoch
from finops.attribution.inputs.list_cost import ListCostResolver, ListLine, pricing_mix
from finops.attribution.inputs.policies import (
    CommitmentPools,
    IdlePolicies,
    SharedRules,
    is_unused_commitment,
)
from finops.attribution.inputs.team_mapping import TeamRef, TeamResolver

# Dimensions of a line item copied onto its ledger rows. (provider, account, sub-account,
# service, pricing category, currency, batch id, pricing mix, on-demand equivalent's source)
Dims = tuple[str, str, str, str, str, str, int, str, str]


LINE_FIELDS = (
    "id", "charge_period_start", "charge_period_end", "effective_cost", "resource_id",
    "resource_name", "resource_type", "sku_id", "tags", "x_instance_type", "x_gpu_count",
    "x_gpu_model", "charge_category", "service_category", "list_cost", "contracted_cost",
    "consumed_quantity", "consumed_unit", "commitment_discount_id",
    "commitment_discount_status", "region_id",
    "provider_name", "billing_account_id",
    "sub_account_id", "service_name", "pricing_category", "billing_currency", "batch_id",
)  # fmt: skip


def _node_name_of_gpu_line(resource_name: str, resource_id: str, tags: dict[str, object]) -> str:
    """Name for a GPU-type line that no job ran on (all idle): its node tag, name or id."""
    for key in engine.NODE_TAG_KEYS:
        value = tags.get(key)
        if isinstance(value, str) and value:
            return value
    if resource_name:
        return resource_name
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


# A line item between reading and team creation: (id, start, end, cost, on-demand equivalent,
# contracted cost, index of its resource in LineStager.resources, index of its dims).
Staged = tuple[int, int, int, Decimal, Decimal, Decimal, int, int]
_ZERO = Decimal(0)
# Tags of a line without tags.
_NO_TAGS: dict[str, object] = {}
# JSONField.from_db_value's expression: none (the column itself, not a key transform).
_NO_EXPRESSION: Any = None
# Where a line's columns sit in its row (LINE_FIELDS' order).
_PK, _START, _END, _COST, _LIST, _CONTRACTED, _QUANTITY = 0, 1, 2, 3, 14, 15, 16
# The columns of a line that are its billed resource's (all but the amounts and the period): a
# node bills 744 lines a month alike, so what stage takes from them is resolved once per
# distinct combination (_LineResource), the combination read by one C call per row.
RESOURCE_AT = (4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 18, 19, 20, *range(21, len(LINE_FIELDS)))
_resource_key = itemgetter(*RESOURCE_AT)
# LineStager.amount_of: a line's on-demand equivalent is its ListCost, its EffectiveCost.
TAKES_LIST, TAKES_COST = 1, 2


@dataclass(frozen=True, slots=True)
class _LineResource:
    """What stage takes from a line's resource columns: node, GPUs, pricing mix, owner, unused
    commitment, shared-cost rule, the columns ListCostResolver reads, and whether the budget
    rollups (ChargeSums) take its lines."""

    tags: dict[str, object]
    node: str | None
    gpus: int | None
    mix: str
    owner: TeamRef | None
    unused: tuple[str, str, str] | None
    shared: engine.SharedRule | None
    charge_category: str
    instance_type: str
    region: str
    unit: str
    dims: tuple[Any, ...]  # provider, account, sub-account, service, pricing, currency, batch
    charged: bool


class _NodeOfLine:
    """(node name, GPUs per node) of a line item's resource, computed once per distinct
    resource: a node bills one line an hour, 744 a month, all with the same answer."""

    def __init__(self, names: dict[str, str]) -> None:
        self._names = names
        self._memo: dict[tuple[Any, ...], tuple[str | None, int | None]] = {}

    def __call__(
        self, res_id: str, res_name: str, res_type: str, sku: str, tags: dict[str, object],
        x_type: str, x_count: int | None, x_model: str,
    ) -> tuple[str | None, int | None]:  # fmt: skip
        # Only string node tags can name a node (match_node, _node_name_of_gpu_line).
        node_tags = tuple(
            value if isinstance(value, str) else None
            for value in map(tags.get, engine.NODE_TAG_KEYS)
        )
        key = (res_id, res_name, res_type, sku, x_type, x_count, x_model, node_tags)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._resolve(
                res_id, res_name, res_type, sku, tags, x_type, x_count, x_model
            )
        return found

    def _resolve(
        self, res_id: str, res_name: str, res_type: str, sku: str, tags: dict[str, object],
        x_type: str, x_count: int | None, x_model: str,
    ) -> tuple[str | None, int | None]:  # fmt: skip
        node = engine.match_node(
            resource_name=res_name, resource_id=res_id, tags=tags, node_names=self._names
        )
        spec = line_gpu_spec(
            x_instance_type=x_type, x_gpu_count=x_count, x_gpu_model=x_model, sku_id=sku,
            resource_type=res_type,
        )  # fmt: skip
        if node is None and spec is not None:
            node = _node_name_of_gpu_line(res_name, res_id, tags)
        return node, (spec.count if spec is not None else None)


class LineStager:
    """The first pass over the month's line items: node and GPUs, on-demand equivalent, ledger
    dimensions, owner reference, unused commitment and shared-cost rule of each line.

    Rows come with their tags as the database's JSON text (values_rows raw): decoded once per
    distinct text."""

    def __init__(
        self, resolver: TeamResolver, node_names: dict[str, str], shared_rules: SharedRules,
        charges: ChargeSums | None = None,
    ) -> None:  # fmt: skip
        self.resolver = resolver
        self.charges = charges
        self._recurring = charges.recurring_categories if charges is not None else frozenset()
        self.shared_rules = shared_rules
        self.node_of_line = _NodeOfLine(node_names)
        self.commitment_pools = CommitmentPools()
        self.list_of_line = ListCostResolver()
        self.line_dims: dict[int, int] = {}
        self._dims_index: dict[Dims, int] = {}
        # Database value of a charge period bound -> epoch seconds (bounds repeat every hour),
        # and -> datetime for the budget rollups.
        self._epochs: dict[Any, int] = {}
        self._datetimes: dict[Any, dt.datetime] = {}
        # The distinct resources, and their index by resource columns.
        self.resources: list[_LineResource] = []
        self._resource_index: dict[tuple[Any, ...], int] = {}
        # (resource index, ListCost, EffectiveCost, quantity, period seconds) -> (on-demand
        # equivalent, dims index): node lines repeat their amounts hour after hour.
        self._amounts: dict[tuple[Any, ...], tuple[int, Decimal, int]] = {}
        self._tags: dict[Any, dict[str, object]] = {}
        self._decode_tags = CostLineItem._meta.get_field("tags").from_db_value

    def dims(self) -> list[Dims]:
        """The distinct ledger dimensions, in the order of the indexes in line_dims."""
        return list(self._dims_index)

    def stage_all(self, rows: Iterable[tuple[Any, ...]]) -> list[Staged]:
        staged: list[Staged] = []
        append, line_dims = staged.append, self.line_dims
        index, resources, amounts = self._resource_index, self.resources, self._amounts
        epochs, epoch_of = self._epochs, self._epoch
        for row in rows:
            key = _resource_key(row)
            at = index.get(key)
            if at is None:
                at = index[key] = len(resources)
                resources.append(self._resource(row))
            pk, start, end, cost = row[_PK], row[_START], row[_END], row[_COST]
            start_s = epochs.get(start)
            if start_s is None:
                start_s = epoch_of(start)
            end_s = epochs.get(end)
            if end_s is None:
                end_s = epoch_of(end)
            list_cost, quantity = row[_LIST], row[_QUANTITY]
            amounts_key = (at, list_cost, cost, quantity, end_s - start_s)
            found = amounts.get(amounts_key)
            if found is None:
                found = amounts[amounts_key] = self.amount_of(resources[at], *amounts_key[1:])
            if resources[at].charged:
                self.charge(resources[at], start, end, cost)
            taken, estimate, group = found
            line_dims[pk] = group
            # The row's own ListCost or EffectiveCost (not an equal one of another row).
            list_value = list_cost if taken == TAKES_LIST else cost if taken else estimate
            contracted = row[_CONTRACTED] or _ZERO
            append((pk, start_s, end_s, cost, list_value, contracted, at, group))
        return staged

    def amount_of(
        self, resource: _LineResource, list_cost: Decimal | None, cost: Decimal,
        quantity: Decimal | None, period: int,
    ) -> tuple[int, Decimal, int]:  # fmt: skip
        """Where a line's on-demand equivalent comes from (TAKES_LIST: its ListCost,
        TAKES_COST: its EffectiveCost, 0: the value given), and its ledger dimensions' index."""
        list_value, list_source = self.list_of_line(
            ListLine(
                resource.charge_category, list_cost, cost, resource.dims[0],
                resource.instance_type, resource.region, quantity, resource.unit, period,
            )
        )  # fmt: skip
        dims: Dims = (*resource.dims, resource.mix, list_source)  # type: ignore[assignment]
        taken = TAKES_LIST if list_value is list_cost else TAKES_COST if list_value is cost else 0
        return taken, list_value, self._dims_index.setdefault(dims, len(self._dims_index))

    def charge(self, resource: _LineResource, start: Any, end: Any, cost: Decimal) -> None:
        assert self.charges is not None
        provider, _, sub, _, _, currency, _ = resource.dims
        self.charges.add(
            self._datetime(start), self._datetime(end), provider, currency, cost,
            resource.charge_category, sub, resource.tags,
        )  # fmt: skip

    def _tags_of(self, value: Any) -> dict[str, object]:
        """A line's tags from the database's JSON text (one dict per distinct text)."""
        found = self._tags.get(value)
        if found is None:
            decoded = self._decode_tags(value, _NO_EXPRESSION, connections[CostLineItem.objects.db])
            found = self._tags[value] = decoded if isinstance(decoded, dict) else _NO_TAGS
        return found

    def _resource(self, row: tuple[Any, ...]) -> _LineResource:
        """What stage takes from a line's resource columns (not its amounts or period)."""
        (_, _, _, _, res_id, res_name, res_type, sku, raw_tags, x_type, x_count, x_model,
         charge_category, service_category, _, _, _, unit, commitment_id, commitment_status,
         region, *dim_values) = row  # fmt: skip
        tags = self._tags_of(raw_tags)
        node, gpus = self.node_of_line(
            res_id, res_name, res_type, sku, tags, x_type, x_count, x_model
        )
        mix = pricing_mix(
            pricing_category=dim_values[4], sku_id=sku, commitment_discount_id=commitment_id
        )
        owner = self.resolver.line_team(tags=tags, sub_account=str(dim_values[2]))
        unused = None
        if is_unused_commitment(commitment_status):
            # Capacity bought and not used is no node's usage, even when it names a GPU type.
            node, gpus, unused = None, None, (commitment_id, dim_values[0], x_type)
        elif node is not None:
            self.commitment_pools.add_node_line(
                node=node, commitment_id=commitment_id, provider=dim_values[0], instance_type=x_type
            )
        shared = None
        if node is None and unused is None and owner is None and self.shared_rules:
            provider, _, sub, service = dim_values[:4]
            shared = self.shared_rules.match(
                provider=provider, sub_account=sub, service_category=service_category,
                service_name=service, charge_category=charge_category,
            )  # fmt: skip
        charged = self.charges is not None and bool(tags or charge_category in self._recurring)
        return _LineResource(
            tags, node, gpus, mix, owner, unused, shared, charge_category, x_type, region, unit,
            tuple(dim_values), charged,
        )  # fmt: skip

    def _epoch(self, value: dt.datetime | Decimal) -> int:
        seconds = self._epochs.get(value)
        if seconds is None:
            seconds = self._epochs[value] = to_epoch(value)
        return seconds

    def _datetime(self, value: dt.datetime | Decimal) -> dt.datetime:
        found = self._datetimes.get(value)
        if found is None:
            found = self._datetimes[value] = to_datetime(value)
        return found


def engine_lines(
    staged: list[Staged],
    stager: LineStager,
    resolver: TeamResolver,
    idle_policies: IdlePolicies,
    owners: list[tuple[Any, ...]] | None = None,
) -> list[engine.LineItem]:
    """The second pass: owners become team ids, and the idle policy decides who owns (or
    spreads) the idle of node lines and of unused commitments; once per distinct resource
    (owners: line_owners' answer, when the caller has it)."""
    of_resource = owners or line_owners(stager, resolver, idle_policies)
    make = engine.LineItem
    return [
        make(
            pk,
            start_s,
            end_s,
            cost,
            node,
            gpus,
            category,
            team_id,
            group,
            provider,
            currency,
            pool,
            shared,
            list_value,
            contracted,
        )
        for pk, start_s, end_s, cost, list_value, contracted, at, group in staged
        for node, gpus, category, team_id, pool, shared, provider, currency in (of_resource[at],)
    ]


def line_owners(
    stager: LineStager, resolver: TeamResolver, idle_policies: IdlePolicies
) -> list[tuple[Any, ...]]:
    """Per resource: (node, GPUs, category, team, spread pool, shared-cost rule, provider,
    currency) of its engine lines."""
    return [
        _line_owner(resource, resolver, idle_policies, stager.commitment_pools)
        for resource in stager.resources
    ]


def _line_owner(
    resource: _LineResource,
    resolver: TeamResolver,
    idle_policies: IdlePolicies,
    commitment_pools: CommitmentPools,
) -> tuple[Any, ...]:
    """A resource's (node, GPUs, category, team, spread pool, shared-cost rule, provider,
    currency) on its engine lines."""
    node, unused = resource.node, resource.unused
    team_id = resolver.team_id(resource.owner)
    category = engine.TAGGED if team_id is not None else engine.UNALLOCATED
    pool = None
    if node is not None:
        # The idle policy decides who owns the node line's idle part (or spreads it).
        idle = idle_policies.for_node(node)
        team_id, pool = idle.idle_owner(team_id), idle.pool
    elif unused is not None:
        # Unused commitment is idle capacity: the idle policy of the pool it was bought for.
        commitment_id, provider_name, instance_type = unused
        idle = commitment_pools.idle_of(
            idle_policies,
            commitment_id=commitment_id,
            provider=provider_name,
            instance_type=instance_type,
        )
        category, team_id, pool = engine.IDLE, idle.idle_owner(team_id), idle.pool
    provider, currency = resource.dims[0], resource.dims[5]
    return (node, resource.gpus, category, team_id, pool, resource.shared, provider, currency)
