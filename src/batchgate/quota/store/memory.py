"""The in-process quota store: shared buckets and window logs in a dict, on the injected clock.

The reference implementation of the seam, and a way for several gateways in one process to
hold one limit together (pass the same store object to each).
"""

from __future__ import annotations

from collections.abc import Mapping

from batchgate.clock import Clock
from batchgate.quota.store.ledger import QuotaState, apply
from batchgate.quota.store.protocol import Pace, Settle, Take


class MemoryQuotaStore:
    """See the module docstring."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._quotas: dict[str, QuotaState] = {}

    async def apply(self, quota: str, paces: Mapping[str, Pace], take: Take | None, settle: Settle) -> float:
        state = self._quotas.setdefault(quota, QuotaState())
        return apply(state, self._clock.now(), paces, take, settle)

    def describe(self) -> str:
        return "memory"

    async def close(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"MemoryQuotaStore(quotas={len(self._quotas)})"
