"""The charge basis of each cluster (DESIGN 5.3): `requested` (default) or `used`.

On a `used` cluster a job with a JobGpuUtilisation row u is charged GPUs x u instead of the GPUs
it requested, kept exact: u = p/q as a reduced Fraction, the job's GPU micros times p and its
GPU denominator times q (the engine already carries GPUs as micros / denominator). What the job
requested but did not use is then idle of its node, under the node's idle policy. A job on a
`used` cluster without a utilisation row is charged as requested. GPU-seconds on the ledger and
the rollups are the charged (used) GPU-seconds.
"""

from __future__ import annotations

from fractions import Fraction

from billing_ingest.models import JobGpuUtilisation
from finops.attribution.models import ChargeBasis

# (cluster, job id) -> utilisation as an exact fraction 0..1.
Utilisations = dict[tuple[str, str], Fraction]


def used_basis_utilisations() -> Utilisations:
    """Utilisation of every job that has one on a cluster whose charge basis is `used`."""
    clusters = list(
        ChargeBasis.objects.filter(basis=ChargeBasis.Basis.USED).values_list("cluster", flat=True)
    )
    if not clusters:
        return {}
    rows = JobGpuUtilisation.objects.filter(cluster__in=clusters).values_list(
        "cluster", "job_id", "utilisation"
    )
    return {(cluster, job_id): Fraction(value) for cluster, job_id, value in rows}


def charged_gpus(micros: int, denominator: int, utilisation: Fraction | None) -> tuple[int, int]:
    """(GPU micros, denominator) a job is charged for; unchanged without a utilisation."""
    if utilisation is None:
        return micros, denominator
    return micros * utilisation.numerator, denominator * utilisation.denominator
