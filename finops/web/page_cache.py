"""Parts of a page computed once per data version (issue 29: pages at six-month demo scale).

A few panels sum every run of several months in Python (the waste card: each run's attempts,
metrics and checkpoints; the checkpoint advice). Their figures change only with the data, so
they are kept in Django's cache as the API's answers and /metrics' money are
(finops/api/cache.py), keyed by:
- the data version (finops.org.DataVersion), bumped after every commit that changes what a
  report shows (attribution, run metrics, FX rates, imports...): new data shows at once;
- today's date, the panel's name and its `key`: its arguments (month, the team ids it covers,
  whether it shows the unowned bucket) and the inputs the data version does not follow (the
  pricing assumptions' checkpoint and restart minutes the waste is estimated with, the newest
  energy import). The month list every page reads needs none: it is two small queries.

FINOPS_API_CACHE_SECONDS bounds how long (0: no cache; the tests run without it unless they
turn it on). A panel's arguments, not the user, are in the key: two users asking for the same
teams share the answer, and nobody gets a panel of teams they were not given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import TypeVar

from django.core.cache import cache
from django.utils import timezone

from finops.api.cache import cache_seconds
from finops.org.selectors import data_version_current

KEY_PREFIX = "finops:page:v1"
T = TypeVar("T")


def panel_cached(name: str, *, key: Callable[[], Iterable[object]], compute: Callable[[], T]) -> T:
    """compute(), or the value it returned for the same name, key and data version. `key` is
    called only when the cache is on: its reads cost nothing without one."""
    seconds = cache_seconds()
    if not seconds:
        return compute()
    text = "\n".join(
        [
            str(data_version_current()),
            timezone.now().date().isoformat(),
            name,
            *(repr(part) for part in key()),
        ]
    )
    cache_key = f"{KEY_PREFIX}:{hashlib.sha256(text.encode()).hexdigest()}"
    hit = cache.get(cache_key)
    if isinstance(hit, tuple) and len(hit) == 1:
        value: T = hit[0]
        return value
    value = compute()
    # In a 1-tuple: an empty list is a value too, not a miss.
    cache.set(cache_key, (value,), seconds)
    return value
