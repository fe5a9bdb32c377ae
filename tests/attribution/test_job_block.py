"""The jobs as columns (engine/job_block.py): the job-node entries the vectorised split reads from
a JobBlock, chunk by chunk, are those it read from Job values one by one (JobIndex's rules:
each node of a job once, running jobs to the horizon, nothing for jobs without time, GPUs or
nodes, in job id order); and node_clusters, which counts the jobs' (node, cluster) pairs,
picks what counting them one Counter per node picked."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from finops.attribution.engine import INFERENCE, TRAINING, Job, LineItem, vector
from finops.attribution.engine.job_block import JobBlock
from finops.attribution.engine.line_block import LineBlock
from finops.attribution.engine.vector_split import Split
from finops.attribution.inputs.policies import node_clusters

NODES = ["g0", "g1", "g2", "g3"]
HORIZON = 40 * 3600
Entry = tuple[str, int, int, int, int, int]


@st.composite
def job_lists(draw: st.DrawFn) -> list[Job]:
    """Jobs in id order: node lists repeating a node or empty, running, ending before they
    start, without GPUs, fractional."""
    ids = draw(st.lists(st.integers(1, 10**6), unique=True, max_size=12))
    jobs = []
    for job_id in sorted(ids):
        start = draw(st.integers(0, HORIZON))
        end = draw(st.one_of(st.none(), st.integers(start - 7200, start + 20 * 3600)))
        jobs.append(
            Job(
                id=job_id,
                nodes=tuple(draw(st.lists(st.sampled_from([*NODES, "elsewhere"]), max_size=4))),
                start=start,
                end=end,
                gpu_micros=draw(st.sampled_from([0, 500_000, 1_000_000, 8_000_000])),
                team_id=draw(st.sampled_from([None, 1, 2])),
                gpu_denominator=draw(st.sampled_from([1, 3, 7])),
                category=draw(st.sampled_from([TRAINING, INFERENCE])),
            )
        )
    return jobs


def _rows_entries(jobs: list[Job], names: list[str]) -> list[Entry]:
    """What Split read from Job values before the JobBlock (the per-job loop, kept here)."""
    index = {name: i for i, name in enumerate(names)}
    entries: list[Entry] = []
    for job in jobs:
        end = HORIZON if job.end is None else job.end
        job_nodes = list(dict.fromkeys(job.nodes))
        if end <= job.start or job.gpu_micros <= 0 or not job_nodes:
            continue
        count = len(job_nodes) * job.gpu_denominator
        for node in job_nodes:
            if node in index:
                entries.append((node, job.id, job.start, end, job.gpu_micros, count))
    return entries


def _columns_entries(split: Split) -> list[Entry]:
    jobs: JobBlock = split.jobs
    ids = jobs.job_ids(split.e_job)
    columns = (split.e_start, split.e_end, split.e_micros, split.e_count)
    return [
        (split.node_names[n], i, s, e, m, c)
        for n, i, s, e, m, c in zip(
            split.e_node.tolist(), ids, *(c.tolist() for c in columns), strict=True
        )
    ]


def _read(block: LineBlock, jobs: JobBlock) -> Split:
    split = Split.__new__(Split)
    split.block = block
    split._read(jobs, HORIZON)
    return split


def _sorted_by_job(entries: list[Entry]) -> list[Entry]:
    """Entries by job, stably: a job's own entries (one per node) in any order."""
    return sorted(entries, key=lambda e: (e[1], e[0]))


@settings(max_examples=200, deadline=None)
@given(
    jobs=job_lists(),
    nodes=st.lists(st.sampled_from(NODES), min_size=1, unique=True),
    chunk_lines=st.integers(1, 4),
)
def test_each_chunk_reads_the_entries_the_job_values_gave(
    jobs: list[Job], nodes: list[str], chunk_lines: int
) -> None:
    lines = [
        LineItem(id=i, start=h * 3600, end=(h + 1) * 3600, cost=Decimal(0), node=node, gpus=8)
        for i, (node, h) in enumerate((n, h) for n in sorted(nodes) for h in (0, 5))
    ]
    block = LineBlock.of_items(lines)
    job_block = JobBlock.of_jobs(jobs)
    seen: list[str] = []
    with _chunk_lines(chunk_lines):
        for chunk, chunk_jobs in vector._chunks(block, job_block):
            split = _read(chunk, chunk_jobs)
            expected = _rows_entries(jobs, split.node_names)
            got = _columns_entries(split)
            # Job order is kept (the split orders a node-hour's jobs by it); within a job the
            # entries may come in another order.
            assert [e[1] for e in got] == sorted(e[1] for e in got)
            assert _sorted_by_job(got) == _sorted_by_job(expected)
            seen += split.node_names
    assert sorted(seen) == sorted(nodes)


class _chunk_lines:
    def __init__(self, size: int) -> None:
        self.size = size

    def __enter__(self) -> None:
        self.saved, vector.CHUNK_LINES = vector.CHUNK_LINES, self.size

    def __exit__(self, *_: object) -> None:
        vector.CHUNK_LINES = self.saved


@settings(max_examples=100, deadline=None)
@given(jobs=job_lists())
def test_the_block_keeps_each_jobs_values(jobs: list[Job]) -> None:
    block = JobBlock.of_jobs(jobs)
    at = np.arange(len(jobs), dtype=np.int64)
    assert block.job_ids(at) == [job.id for job in jobs]
    assert block.job_teams(at) == [job.team_id for job in jobs]
    assert block.job_categories(at) == [job.category for job in jobs]
    assert block.ends(HORIZON).tolist() == [HORIZON if job.end is None else job.end for job in jobs]
    assert block.node_count.tolist() == [len(set(job.nodes)) for job in jobs]


def _clusters_one_counter_per_node(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """node_clusters as it counted before (a Counter per node)."""
    counts: dict[str, Counter[str]] = {}
    for node, cluster in pairs:
        counts.setdefault(node, Counter())[cluster] += 1
    return {
        node: min(counter.items(), key=lambda item: (-item[1], item[0]))[0]
        for node, counter in counts.items()
    }


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(["x", "y", "z"]))))
def test_node_clusters_picks_what_one_counter_per_node_picked(
    pairs: list[tuple[str, str]],
) -> None:
    expected = _clusters_one_counter_per_node(pairs)
    assert list(node_clusters(pairs).items()) == list(expected.items())
