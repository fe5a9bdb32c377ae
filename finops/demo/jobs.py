"""The demo's job record: one Slurm allocation as the packer (workload.py) schedules it and the
generators write it (generate_sacct.py, generate_kubernetes.py, carry.py, run_metrics.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Job:
    """One Slurm allocation of the demo. Times are seconds since the month start."""

    cluster: str
    partition: str
    run_id: str
    name: str
    account: str
    user: str
    uid: int
    wckey: str
    comment: str
    gpu_model: str
    gpus_per_node: int
    cpus_per_gpu: int
    mem_gib_per_gpu: int
    nodes: list[str]
    start: int | None  # None: still pending at month end
    end: int | None  # None: still running (or pending) at month end
    state: str
    cancelled_by: int | None = None
    array_key: str = ""
    array_index: int = -1
    interactive: bool = False
    # A server or runner (Workload.service): `service=true` in its comment, a label on a pod.
    service: bool = False
    job_id: str = ""
    job_id_raw: str = ""
    # Requeued under the same JobID after this job was preempted (`sacct -D` prints both).
    requeue_of: Job | None = None
    # A job running at month end: when it would have ended (seconds from this month's start,
    # past its end); the next month's export lists it again with its real end (carry.py).
    planned_end: int | None = None

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * len(self.nodes)
