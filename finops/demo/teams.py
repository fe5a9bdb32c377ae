"""Who runs what on the demo clusters: the teams (Slurm accounts, users, where their jobs carry
the run id) and the workloads they submit. workload.py packs them onto the fleet.
"""

from __future__ import annotations

from dataclasses import dataclass


class RunKey:
    """Where a team's jobs carry their run id (DESIGN section 5)."""

    WCKEY = "wckey"
    COMMENT = "comment"
    NAME = "name"


@dataclass(frozen=True)
class DemoTeam:
    slug: str
    name: str
    run_key: str
    # Slurm accounts; the first one is the team's main account.
    accounts: tuple[str, ...]
    users: tuple[tuple[str, int], ...]


TEAMS: tuple[DemoTeam, ...] = (
    DemoTeam("vision", "Vision", RunKey.COMMENT, ("cv",), (("alice", 20101), ("bram", 20102))),
    DemoTeam(
        "language",
        "Language",
        RunKey.WCKEY,
        ("nlp",),
        (("dana", 20201), ("eli", 20202), ("farah", 20203)),
    ),
    DemoTeam("speech", "Speech", RunKey.NAME, ("speech", "asr"), (("gus", 20301), ("hana", 20302))),
    DemoTeam("recsys", "Recommendations", RunKey.WCKEY, ("recsys",), (("ivan", 20401),)),
    DemoTeam("platform", "Platform", RunKey.NAME, ("infra",), (("kai", 20501),)),
)
TEAM_BY_SLUG = {t.slug: t for t in TEAMS}
# An account no mapping rule names: by the attribution convention it becomes a team of that name.
SANDBOX_ACCOUNT = "sandbox"
SANDBOX_USERS = (("lee", 20601), ("mo", 20602))
ADMIN_UID = 0


@dataclass(frozen=True)
class Workload:
    """A kind of run a team submits; every run of it gets an id like `llama-ft-7b-r3`."""

    team: str  # team slug, or "" for the sandbox account
    base: str
    clusters: tuple[str, ...]
    gpu_models: tuple[str, ...]
    nodes: int
    gpus_per_node: int
    hours: tuple[float, float]
    time_limit_hours: float
    jobs_per_run: tuple[int, int]
    weight: float
    spot_ok: bool = False
    # Chained jobs continue one another (a long pre-training split at the time limit).
    chained: bool = False
    # Each job of the run is a job array of this many tasks (a hyper-parameter sweep).
    array: int = 0
    account: str = ""
    # Job name when the run id travels in WCKey or Comment.
    job_name: str = "train"
    interactive: bool = False
    # Runs only on these partitions, and they run nothing else (a pool kept for this work:
    # Slurm's AllowAccounts and a QOS); empty: any partition of its clusters.
    partitions: tuple[str, ...] = ()
    # A service kept running: its next job is submitted as soon as the last one ends (minutes),
    # not after an idle gap, so its pool's use is steady round the clock.
    always_on: bool = False
    # A server or runner, not a training run: its jobs say so (`--comment service=true`, pod
    # label `finops.io/service`), so they get no checkpoint advice and no rework waste.
    service: bool = False


_ALL = ("aws-east", "gcp-central", "azure-west", "coreweave-lga")
_H100 = ("h100",)
_ANY = ("h100", "a100")

WORKLOADS: tuple[Workload, ...] = (
    # Language: long multi-node pre-training on H100, fine-tunes anywhere.
    Workload(
        "language", "llama-pretrain-70b", ("aws-east", "coreweave-lga"), _H100, 4, 8,
        (20.0, 30.0), 24.0, (4, 10), 3.0, chained=True,
    ),
    Workload(
        "language", "llama-ft-7b", _ALL, _ANY, 1, 8, (2.0, 9.0), 12.0, (1, 4), 4.0, spot_ok=True,
    ),
    Workload(
        "language", "mistral-eval", _ALL, _ANY, 1, 2, (0.5, 2.0), 4.0, (2, 6), 3.0,
        spot_ok=True, job_name="eval",
    ),
    # Vision: multi-node ViT pre-training, SAM fine-tunes, learning-rate sweeps as arrays.
    Workload(
        "vision", "vit-l-pretrain", ("gcp-central", "aws-east", "coreweave-lga"), _H100, 2, 8,
        (8.0, 14.0), 12.0, (3, 8), 2.5, chained=True,
    ),
    Workload(
        "vision", "sam-ft", ("gcp-central", "aws-east"), _ANY, 1, 8, (3.0, 8.0), 10.0,
        (1, 3), 3.0, spot_ok=True,
    ),
    Workload(
        "vision", "vit-b-lr-sweep", ("gcp-central", "aws-east"), _ANY, 1, 1, (1.0, 3.0), 4.0,
        (1, 2), 2.0, spot_ok=True, array=8, job_name="sweep",
    ),
    # Speech: Whisper fine-tunes and TTS on Azure and GCP, ASR evals with partial nodes.
    Workload(
        "speech", "whisper-ft-large", ("azure-west", "gcp-central"), _ANY, 1, 8, (2.0, 8.0),
        10.0, (1, 3), 3.5, spot_ok=True,
    ),
    Workload(
        "speech", "tts-vits", ("azure-west", "coreweave-lga"), _ANY, 1, 4, (3.0, 10.0), 12.0,
        (1, 3), 2.0, spot_ok=True, account="asr",
    ),
    Workload(
        "speech", "asr-eval", ("azure-west", "gcp-central"), _ANY, 1, 1, (0.3, 1.5), 2.0,
        (2, 5), 2.0, spot_ok=True, array=4, account="asr",
    ),
    # Recommendations: two-node DLRM training, ranker fine-tunes on two GPUs.
    Workload(
        "recsys", "dlrm-train", ("azure-west", "aws-east"), _ANY, 2, 8, (4.0, 10.0), 12.0,
        (1, 4), 2.0,
    ),
    Workload(
        "recsys", "ranker-ft", _ALL, _ANY, 1, 2, (1.0, 5.0), 6.0, (1, 4), 2.0, spot_ok=True,
    ),
    # Vision's continual training: the detector retrained on the day's newly labelled images,
    # a whole p4d node in twelve-hour jobs round the clock, on vision's own on-demand A100
    # pool (the steady use a commitment would cover).
    Workload(
        "vision", "det-continual", ("aws-east",), ("a100",), 1, 8, (11.0, 11.8), 12.0, (6, 14),
        1.0, partitions=("a100-cv",), always_on=True,
    ),
    # Platform: burn-in and health checks on every partition.
    Workload(
        "platform", "nccl-burnin", _ALL, _ANY, 1, 8, (0.25, 0.75), 1.0, (1, 2), 0.6,
        spot_ok=True,
    ),
    Workload(
        "platform", "gpu-healthcheck", _ALL, _ANY, 1, 1, (0.1, 0.3), 0.5, (1, 3), 0.6,
        spot_ok=True,
    ),
    # Platform's GPU CI runners (driver, NCCL and image tests for every merge): two GPUs per
    # runner, each runner a day-long job re-registered when it ends, on an always-on pool;
    # services, not training (they write no checkpoints).
    Workload(
        "platform", "gpu-ci-runner", ("gcp-central",), ("a100",), 1, 2, (23.0, 23.8), 24.0,
        (5, 7), 1.0, partitions=("a100-ci",), always_on=True, job_name="ci-runner",
        service=True,
    ),
    # Notebooks under an account nobody mapped.
    Workload(
        "", "notebook", _ALL, _ANY, 1, 1, (0.5, 4.0), 8.0, (1, 1), 0.8, spot_ok=True,
        account=SANDBOX_ACCOUNT, job_name="interactive", interactive=True,
    ),
)  # fmt: skip
# Partitions kept for the workloads that name them (nothing else runs there).
DEDICATED_PARTITIONS = frozenset(p for w in WORKLOADS for p in w.partitions)
