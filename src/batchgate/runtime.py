"""Everything batchgate keeps alive for one provider: its client, quota pool, concurrency slots,
circuit breaker, token counter and statistics recorder — built from its config."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from batchgate.clock import Clock
from batchgate.config import ProviderConfig
from batchgate.policy.circuit import CircuitBreaker, CircuitSettings
from batchgate.providers.base import ProviderClient
from batchgate.quota.pool import QuotaPool
from batchgate.stats import ProviderRecorder
from batchgate.tokens import TokenCounter

UNLIMITED_SLOTS = 1_000_000


@dataclass(slots=True)
class ProviderRuntime:
    name: str
    config: ProviderConfig
    client: ProviderClient
    pool: QuotaPool
    slots: asyncio.Semaphore
    breaker: CircuitBreaker
    counter: TokenCounter
    recorder: ProviderRecorder


def build_runtime(
    config: ProviderConfig,
    client: ProviderClient,
    counter: TokenCounter,
    clock: Clock,
    circuit: CircuitSettings,
    seed: int = 0,
) -> ProviderRuntime:
    pool = QuotaPool(config.name, config.limits, clock)
    breaker = CircuitBreaker(circuit)
    return ProviderRuntime(
        name=config.name,
        config=config,
        client=client,
        pool=pool,
        slots=asyncio.Semaphore(config.max_concurrency or UNLIMITED_SLOTS),
        breaker=breaker,
        counter=counter,
        recorder=ProviderRecorder(config.name, seed=seed),
    )
