"""Pools of several processes sharing one key's quota through a store (FakeClock, memory and
SQLite stores): together they keep one limit, settlements reach the others, an unreachable
store stops sending."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from batchgate.clock import FakeClock
from batchgate.errors import QuotaStoreUnavailable
from batchgate.models import Cost, Usage
from batchgate.quota.dimension import COLD_JITTER, JITTER, MIN_WINDOW
from batchgate.quota.pool import QuotaLimits, QuotaPool, Reservation
from batchgate.quota.shared import SETTLE_WITHIN, SharedQuota
from batchgate.quota.store.memory import MemoryQuotaStore
from batchgate.quota.store.protocol import QuotaStore
from batchgate.quota.store.sqlite_store import SqliteQuotaStore

RPM = QuotaLimits(rpm=600, safety=1.0)  # 10 requests/s; each pool paces itself at the whole of it
ONE = Cost(requests=1)


def process(store: QuotaStore, clock: FakeClock, name: str = "p") -> QuotaPool:
    """One process's pool for the key, sharing its quota through `store`."""
    pool = QuotaPool(name, RPM, clock)
    pool.share(SharedQuota(store, "https://api.example/v1#key", pool.paces, clock))
    return pool


async def send(pool: QuotaPool, sent: list[float], clock: FakeClock, latency: float | None = None) -> None:
    """What the scheduler does before sending: the pool's admission, then the shared one; with
    `latency`, the send and its answer that long after (which ends the pool's cold start)."""
    res = await pool.acquire(ONE)
    assert pool.shared is not None
    await pool.shared.take(res)
    sent.append(clock.now())
    if latency is not None:
        pool.sent(res)
        await clock.sleep(latency)
        pool.reconcile(res, Usage())


async def run_for(clock: FakeClock, seconds: float, step: float = 0.005) -> None:
    for _ in range(round(seconds / step)):
        clock.advance(step)
        for _ in range(4):
            await asyncio.sleep(0)


def most_in_a_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t < start + window) for i, start in enumerate(times))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_two_processes_together_keep_one_limit_and_reach_it(kind: str, tmp_path: Path) -> None:
    clock = FakeClock()
    store: QuotaStore = MemoryQuotaStore(clock)
    if kind == "sqlite":
        store = SqliteQuotaStore(tmp_path / "ledger.sqlite3", clock)
    pools = [process(store, clock, "a"), process(store, clock, "b")]
    sent: list[list[float]] = [[], []]
    tasks = [
        asyncio.ensure_future(send(p, sent[i], clock, latency=0.2))
        for i, p in enumerate(pools)
        for _ in range(80)
    ]
    await run_for(clock, 10.0)
    together = sent[0] + sent[1]
    # alone, each pool would have sent ~10/s: together they send what one limit allows, and the
    # store's window log keeps every second of it whole without a request of headroom
    assert most_in_a_window(together, 1.0) <= 10
    assert most_in_a_window(together, 5.0) <= 50
    assert len(together) >= 0.95 * 10 * 10
    assert min(len(sent[0]), len(sent[1])) >= 0.4 * len(together)  # both get their turns
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await store.close()


async def test_without_answers_the_shared_window_counts_each_admission_for_the_cold_span() -> None:
    clock = FakeClock()
    store = MemoryQuotaStore(clock)
    pools = [process(store, clock, "a"), process(store, clock, "b")]
    sent: list[float] = []
    tasks = [asyncio.ensure_future(send(p, sent, clock)) for p in pools for _ in range(40)]
    await run_for(clock, 5.0)
    assert most_in_a_window(sent, MIN_WINDOW + COLD_JITTER) <= 10  # not one more, however late
    assert len(sent) >= 0.95 * 10 * 5 * MIN_WINDOW / (MIN_WINDOW + COLD_JITTER)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_request_sent_late_counts_in_the_shared_window_from_when_it_left() -> None:
    clock = FakeClock()
    store = MemoryQuotaStore(clock)
    a, b = process(store, clock, "a"), process(store, clock, "b")
    warm = [asyncio.ensure_future(send(a, [], clock, latency=0.05)) for _ in range(3)]
    await run_for(clock, 2.0)
    await asyncio.gather(*warm)  # answered: a is past its cold start

    async def take_only() -> Reservation:
        res = await a.acquire(ONE)
        assert a.shared is not None
        await a.shared.take(res)
        return res

    takes = [asyncio.ensure_future(take_only()) for _ in range(10)]  # a second's allowance ...
    await run_for(clock, 1.0)
    left = clock.now()
    for take in takes:  # ... sent only now, after waiting for in-flight places
        a.sent(take.result())
    sent: list[float] = []
    task = asyncio.ensure_future(send(b, sent, clock))
    await run_for(clock, 2.0)
    await task
    # without the restamp b would send as soon as a's first take was a second old: 0.1 s from now
    assert sent[0] >= left + MIN_WINDOW + JITTER - 1e-6


async def test_a_refund_in_one_process_is_capacity_for_the_other_within_the_settle_delay() -> None:
    clock = FakeClock()
    store = MemoryQuotaStore(clock)
    slow = QuotaLimits(rpm=6, safety=1.0)  # one request per 10 s or slower: no refill to speak of
    a, b = QuotaPool("a", slow, clock), QuotaPool("b", slow, clock)
    for pool in (a, b):
        pool.share(SharedQuota(store, "k", pool.paces, clock))
    res = await a.acquire(ONE)
    assert a.shared is not None
    await a.shared.take(res)
    a.refund(res)  # the provider never admitted it
    await run_for(clock, SETTLE_WITHIN + 0.01)  # no take of a's carried it: the timer delivers it
    sent: list[float] = []
    task = asyncio.ensure_future(send(b, sent, clock))
    for _ in range(4):
        await asyncio.sleep(0)
    assert sent == [clock.now()]  # admitted without waiting for a refill
    await task


async def test_a_retry_hint_in_one_process_pauses_the_other() -> None:
    clock = FakeClock()
    store = MemoryQuotaStore(clock)
    a, b = process(store, clock, "a"), process(store, clock, "b")
    a.pause(3.0)
    await asyncio.sleep(0)
    sent: list[float] = []
    start = clock.now()
    task = asyncio.ensure_future(send(b, sent, clock))
    await run_for(clock, 4.0)
    await task
    assert sent[0] >= start + 3.0 - 1e-9


async def test_a_429_in_one_process_drains_the_shared_burst() -> None:
    clock = FakeClock()
    store = MemoryQuotaStore(clock)
    burst = QuotaLimits(rpm=600, safety=1.0, burst_seconds=1.0)  # a 10-request bucket
    a = QuotaPool("a", burst, clock)
    b = QuotaPool("b", burst, clock)
    for pool in (a, b):
        pool.share(SharedQuota(store, "k", pool.paces, clock))
    res = await a.acquire(ONE)
    assert a.shared is not None
    assert b.shared is not None
    await a.shared.take(res)
    a.on_rate_limited(res)
    await asyncio.sleep(0)
    res_b = await b.acquire(ONE)  # b's own bucket is still full ...
    waiting = asyncio.ensure_future(b.shared.take(res_b))
    await asyncio.sleep(0)
    assert not waiting.done()  # ... but the shared one was drained
    await run_for(clock, 0.2)
    assert waiting.done()


async def test_an_unusable_store_stops_sending_and_keeps_the_settlements(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteQuotaStore(tmp_path / "ledger.sqlite3", clock)
    pool = process(store, clock)
    assert pool.shared is not None
    res = await pool.acquire(ONE)
    await pool.shared.take(res)
    await store.close()  # the ledger is gone from under us
    pool.refund(res)
    await asyncio.sleep(0)
    res2 = await pool.acquire(ONE)
    with pytest.raises(QuotaStoreUnavailable, match="never falls back to a per-process limit"):
        await pool.shared.take(res2)
    assert pool.shared.failure is not None
    assert res2.shared is None


async def test_an_urgent_take_asks_the_store_before_ordinary_takes_already_waiting() -> None:
    clock = FakeClock()
    other = process(MemoryQuotaStore(clock), clock, "other")  # another process uses up the quota
    shared = SharedQuota(other.shared.store, other.shared.quota, other.paces, clock)  # type: ignore[union-attr]
    pool = QuotaPool("p", QuotaLimits(rpm=600_000, safety=1.0), clock)  # the store is the limit here
    order: list[str] = []

    async def take(name: str, urgent: bool) -> None:
        await shared.take(await pool.acquire(ONE), urgent=urgent)
        order.append(name)

    tasks = [asyncio.ensure_future(take(f"batch-{i}", False)) for i in range(30)]  # 3 s at 10/s
    await run_for(clock, 0.3)
    before = len(order)
    tasks.append(asyncio.ensure_future(take("live", True)))
    await run_for(clock, 4.0)
    await asyncio.gather(*tasks)
    assert before < 20
    assert order.index("live") <= before + 1, order  # after the take holding its turn, before the rest
