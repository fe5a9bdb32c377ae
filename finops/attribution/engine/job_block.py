"""Jobs as columns (issue 34): a JobBlock holds the jobs the vectorised pass (vector.py) splits
lines among as NumPy arrays, and each job's nodes as entries (job, node), so the pass never
loops over Job values per chunk of nodes.

Per job, in id order: id, start, end (running jobs: `open`, their end is the horizon), GPU
micros and denominator, the number of distinct nodes it ran on, and its category and team as
indexes into small tables (few distinct values; a Python value per job is what this avoids).
Entries: each node of a job once, sorted by job (the order of a job's own entries does not
matter: a job has one entry per node, and the split orders a node-hour's jobs by job).

JobBlock.of_jobs makes one from Job values, in one pass (every path of the engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import chain
from operator import attrgetter
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from finops.attribution.engine.values import Job

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
_T = TypeVar("_T")


@dataclass(slots=True)
class JobBlock:
    """Jobs as columns (module docstring)."""

    id: I64
    start: I64
    end: I64
    open: Mask
    micros: I64
    denominator: I64
    node_count: I64
    # Indexes into categories and teams.
    category: I64
    team: I64
    categories: list[str]
    teams: list[int | None]
    # Entries: the job (its index in this block) and the node (its index in nodes).
    e_job: I64
    e_node: I64
    nodes: list[str]
    # Index of each name in nodes.
    node_at: dict[str, int]

    def __len__(self) -> int:
        return len(self.id)

    @classmethod
    def of_jobs(cls, jobs: Sequence[Job]) -> JobBlock:
        """The jobs (in id order) as columns."""
        n = len(jobs)

        def column(name: str) -> I64:
            return np.fromiter(map(attrgetter(name), jobs), dtype=np.int64, count=n)

        ends = list(map(attrgetter("end"), jobs))
        categories, category = _codes(list(map(attrgetter("category"), jobs)))
        teams, team = _codes(list(map(attrgetter("team_id"), jobs)))
        job_nodes = list(map(attrgetter("nodes"), jobs))
        lengths = np.fromiter(map(len, job_nodes), dtype=np.int64, count=n)
        names = list(chain.from_iterable(job_nodes))
        nodes = sorted(set(names))
        index = {name: i for i, name in enumerate(nodes)}
        e_node = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
        e_job = np.repeat(np.arange(n, dtype=np.int64), lengths)
        # Each node of a job once (a node list may name a node twice): unique (job, node).
        if bool((lengths > 1).any()):
            size = max(len(nodes), 1)
            key = np.sort(e_job * size + e_node)
            key = key[np.r_[True, key[1:] != key[:-1]]]
            e_job, e_node = key // size, key % size
        return cls(
            id=column("id"),
            start=column("start"),
            end=np.fromiter((end or 0 for end in ends), dtype=np.int64, count=n),
            open=np.fromiter(map(_is_none, ends), dtype=np.bool_, count=n),
            micros=column("gpu_micros"),
            denominator=column("gpu_denominator"),
            node_count=np.bincount(e_job, minlength=n).astype(np.int64),
            category=category,
            team=team,
            categories=categories,
            teams=teams,
            e_job=e_job,
            e_node=e_node,
            nodes=nodes,
            node_at=index,
        )

    def entries(self, at: I64) -> JobBlock:
        """The same jobs with only these entries (node_count still counts all of a job's
        nodes: a job's GPUs are spread over all of them)."""
        return replace(self, e_job=self.e_job[at], e_node=self.e_node[at])

    def ends(self, horizon: int) -> I64:
        """Each job's end, running jobs' the horizon."""
        ends: I64 = np.where(self.open, horizon, self.end)
        return ends

    def job_ids(self, at: I64) -> list[int]:
        ids: list[int] = self.id[at].tolist()
        return ids

    def job_categories(self, at: I64) -> list[str]:
        categories = self.categories
        return [categories[c] for c in self.category[at].tolist()]

    def job_teams(self, at: I64) -> list[int | None]:
        teams = self.teams
        return [teams[t] for t in self.team[at].tolist()]


def _codes(values: list[_T]) -> tuple[list[_T], I64]:
    """The distinct values (in order of first appearance) and each value's index among them."""
    table = list(dict.fromkeys(values))
    at = {value: i for i, value in enumerate(table)}
    return table, np.fromiter(map(at.__getitem__, values), dtype=np.int64, count=len(values))


def _is_none(value: object) -> bool:
    return value is None
