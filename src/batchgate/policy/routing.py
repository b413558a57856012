"""Choosing among a route's targets: the one that can serve soonest.

Spreading each request to the target with the smallest expected wait makes every target's queue
drain at its own quota rate, so a route's throughput approaches the sum of its targets' quotas.
Ties (typically several idle targets, all waiting 0) go to the target with the most headroom,
then to the earlier one in the route's order. Pure: the caller supplies the candidates and the
measurements. The fail-over is the caller's: it passes only the targets it may use (admission
leaves out those whose circuit is not `available`, which claims no half-open probe, and calls
`allow` on the chosen target only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def choose_target(
    candidates: Sequence[T],
    *,
    wait_of: Callable[[T], float],
    headroom_of: Callable[[T], float],
) -> T | None:
    """The candidate with the smallest wait, then the largest headroom, then first in order.

    None when there is none or every one would wait forever.
    """
    best: T | None = None
    best_key = (math.inf, 0.0)
    for candidate in candidates:
        wait = wait_of(candidate)
        if math.isnan(wait) or wait == math.inf:
            continue
        key = (max(0.0, wait), -headroom_of(candidate))
        if best is None or key < best_key:
            best, best_key = candidate, key
    return best
