"""Fault injection for the crash-safety tests: does nothing unless FINOPS_FAULT_INJECT is set.

The tests start a real worker with, for example, ``FINOPS_FAULT_INJECT=commit`` (kill -9 the
worker process when it reaches the point named "commit") or ``FINOPS_FAULT_INJECT=copy:sleep=3``
(pause there for 3 seconds, so that the test can drop the worker's database connection with
pg_terminate_backend) or ``FINOPS_FAULT_INJECT=attribution_part:raise`` (raise there). With
``FINOPS_FAULT_ONCE=PATH`` the fault fires only while PATH does not exist and creates it, so the
retried or redelivered task then runs normally. The environment is read at each call, never
cached: production code pays one dict lookup.

Points: ``copy`` (a part's rows are COPYed, not committed), ``commit`` (a part's rows and status
committed, its task not yet acknowledged), ``attribute`` (a month's inputs loaded, its ledger not
yet written), ``attribution_part`` (a part of a split month's inputs loaded).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def fault_point(name: str) -> None:
    spec = os.environ.get("FINOPS_FAULT_INJECT", "")
    if not spec:
        return
    point, _, action = spec.partition(":")
    if point != name:
        return
    once = os.environ.get("FINOPS_FAULT_ONCE", "")
    if once:
        marker = Path(once)
        if marker.exists():
            return
        marker.write_text(f"{name} {os.getpid()}\n")
    if action.startswith("sleep="):
        time.sleep(float(action.removeprefix("sleep=")))
        return
    if action == "raise":
        raise FaultInjectedError(f"fault injected at {name}")
    os.kill(os.getpid(), signal.SIGKILL)


class FaultInjectedError(RuntimeError):
    """Raised at a fault point whose action is "raise"."""
