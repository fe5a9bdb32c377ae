"""Stable ids of RunCost rows, so `/api/v1/runs/{id}/` and links to a run survive re-attribution.

Attribution replaces a month's RunCost rows on every run (a restated bill, a new job log), so an
auto-increment id changed each time. A run's id is instead a hash of what identifies its row
(month, team, cluster, currency, run id: the row's unique constraint): the same run gets the
same id after every re-attribution. 53 bits: a positive BigAutoField value that JSON readers
holding numbers as doubles (JavaScript) still read exactly, so an id taken from the API builds
the right URL. Two runs of one month that hash alike are refused (RunIdCollisionError) rather
than merged (about one month in 10^7 with 10^5 runs), and a clash with a row of another month
fails on the primary key: attribution stops loudly, never rewrites another run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

# The largest integer a double holds exactly (Number.MAX_SAFE_INTEGER).
_MAX_ID = (1 << 53) - 1


class RunIdCollisionError(RuntimeError):
    """Two different runs of a month got the same id (never silently one row)."""


def run_cost_id(
    *, month: dt.date, team_id: int | None, cluster: str, currency: str, run_id: str
) -> int:
    """The RunCost id of a run: 53 bits of BLAKE2b over its identifying fields (JSON, so no
    two field lists encode alike), never 0."""
    key = json.dumps([month.isoformat(), team_id, cluster, currency, run_id])
    digest = hashlib.blake2b(key.encode(), digest_size=8, person=b"finops-runcost").digest()
    return (int.from_bytes(digest, "big") & _MAX_ID) or 1
