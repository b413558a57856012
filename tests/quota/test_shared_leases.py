"""Leases: a process takes its shared quota from the store a slice at a time (FakeClock; memory,
and SQLite with one ledger handle per process on one file): a fast key costs a store call per
slice, not per request; an unspent rest goes back; a process joining mid-run shares at once, and
together they keep one limit."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from batchgate.clock import FakeClock
from batchgate.quota.pool import QuotaLimits, QuotaPool
from batchgate.quota.shared import LEASE_LIFE, LEASE_SECONDS, SharedQuota, lease_amounts
from batchgate.quota.store.memory import MemoryQuotaStore
from batchgate.quota.store.protocol import Pace, QuotaStore, Settle, Take
from batchgate.quota.store.sqlite_store import SqliteQuotaStore

from .test_shared_quota import ONE, most_in_a_window, run_for, send

FAST = QuotaLimits(rpm=30_000, safety=1.0)  # 500 requests/s: a lease is 10 of them
PER_SECOND = 500
SLICE = round(PER_SECOND * LEASE_SECONDS)
QUOTA = "https://api.example/v1#key"


def stores(kind: str, clock: FakeClock, tmp_path: Path) -> tuple[QuotaStore, QuotaStore]:
    """Two processes' handles on one shared store."""
    if kind == "memory":
        memory = MemoryQuotaStore(clock)
        return memory, memory
    path = tmp_path / "ledger.sqlite3"
    return SqliteQuotaStore(path, clock), SqliteQuotaStore(path, clock)


def process(store: QuotaStore, clock: FakeClock, name: str) -> QuotaPool:
    pool = QuotaPool(name, FAST, clock)
    pool.share(SharedQuota(store, QUOTA, pool.paces, clock))
    return pool


def shared(pool: QuotaPool) -> SharedQuota:
    assert pool.shared is not None
    return pool.shared


def test_a_lease_is_a_slice_of_the_rate_never_less_than_the_request() -> None:
    paces = {"requests": Pace(500.0, 0.0, 1.0), "tokens": Pace(2000.0, 0.0, 5.0, window=1000.0)}
    assert lease_amounts(paces, {"requests": 1, "tokens": 30}) == {"requests": 10.0, "tokens": 30.0}
    assert lease_amounts(paces, {"requests": 1, "tokens": 5}) == {"requests": 10.0, "tokens": 20.0}
    slow = {"requests": Pace(10.0, 0.0, 1.0)}  # a fifth of a request per slice: one at a time
    assert lease_amounts(slow, {"requests": 1}) == {"requests": 1.0}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_fast_key_asks_the_store_once_a_slice_and_still_keeps_its_limit(
    kind: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    store, _ = stores(kind, clock, tmp_path)
    pool = process(store, clock, "a")
    sent: list[float] = []
    tasks = [asyncio.ensure_future(send(pool, sent, clock, latency=0.05)) for _ in range(1500)]
    await run_for(clock, 2.0)
    assert most_in_a_window(sent, 1.0) <= PER_SECOND
    assert len(sent) >= 0.9 * PER_SECOND * 2.0
    assert shared(pool).spent == len(sent)
    assert shared(pool).takes <= len(sent) / (SLICE / 2)  # a store call per slice, not per request
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await shared(pool).close()
    await store.close()


async def test_a_lease_left_unspent_goes_back_to_the_store() -> None:
    clock = FakeClock()
    store = MemoryQuotaStore(clock)
    pool = process(store, clock, "a")
    await shared(pool).take(await pool.acquire(ONE))  # a slice of 10 taken, one spent
    assert shared(pool).takes == 1
    rest = Take("probe", {"requests": PER_SECOND - 1}, hold=1.0)  # fits the window only if 9 came back
    assert await store.apply(QUOTA, pool.paces(), rest, Settle()) > 0.0
    await run_for(clock, LEASE_LIFE + 0.01)  # idle: the lease ends
    assert await store.apply(QUOTA, pool.paces(), rest, Settle()) == 0.0


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_process_joining_mid_run_shares_the_limit_at_once(kind: str, tmp_path: Path) -> None:
    clock = FakeClock()
    store_a, store_b = stores(kind, clock, tmp_path)
    a = process(store_a, clock, "a")
    sent_a: list[float] = []
    tasks = [asyncio.ensure_future(send(a, sent_a, clock, latency=0.05)) for _ in range(3000)]
    await run_for(clock, 2.0)  # a alone, at the whole limit
    joined = clock.now()
    b = process(store_b, clock, "b")
    sent_b: list[float] = []
    tasks += [asyncio.ensure_future(send(b, sent_b, clock, latency=0.05)) for _ in range(1500)]
    await run_for(clock, 3.0)
    together = sent_a + sent_b
    assert most_in_a_window(together, 1.0) <= PER_SECOND  # never both at the whole limit
    after = [t for t in together if t >= joined]
    assert len(after) >= 0.9 * PER_SECOND * 3.0
    assert sent_b
    assert sent_b[0] <= joined + LEASE_LIFE  # b's first request waited a slice at most
    assert len(sent_b) >= 0.35 * len(after)  # and b gets its share
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for pool in (a, b):
        await shared(pool).close()
    for store in {id(s): s for s in (store_a, store_b)}.values():
        await store.close()


async def test_a_pause_ends_the_lease_so_the_next_request_waits_at_the_store() -> None:
    clock = FakeClock()
    store = MemoryQuotaStore(clock)
    pool = process(store, clock, "a")
    await shared(pool).take(await pool.acquire(ONE))  # a lease of 10, one spent
    shared(pool).pause(1.0)  # a retry hint (as the pool passes it on): the other nine wait too
    start = clock.now()
    sent: list[float] = []
    task = asyncio.ensure_future(send(pool, sent, clock))  # the pool's own bucket is not paused
    await run_for(clock, 1.2)
    await task
    assert sent[0] >= start + 1.0 - 1e-9  # the store's pause held it ...
    assert shared(pool).takes == 2  # ... asked for a new lease, not the old one's rest
