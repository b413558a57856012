"""The quota store fixture: every conformance test runs against each QuotaStore implementation.

Memory and SQLite run on a FakeClock (time moves by `advance`, and only then); Redis runs on the
server's own clock, so its `advance` really waits the (short) time asked for, and `unasked` reads
that clock to say how far it may have moved on its own. Each backend has its marker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from batchgate.clock import FakeClock
from batchgate.quota.store.memory import MemoryQuotaStore
from batchgate.quota.store.protocol import QuotaStore
from batchgate.quota.store.redis_store import RedisQuotaStore
from batchgate.quota.store.sqlite_store import SqliteQuotaStore
from redisutil import BASE_URL, drop_namespace, fresh_namespace, require_redis, server_time

QUOTA_STORE_KINDS = [
    pytest.param("memory", marks=pytest.mark.memory),
    pytest.param("sqlite", marks=pytest.mark.sqlite),
    pytest.param("redis", marks=pytest.mark.redis),
]


@dataclass
class Backend:
    """A store, a way to open another handle on the same shared state (another process), and
    a way to let time pass on the store's clock."""

    store: QuotaStore
    another: Callable[[], QuotaStore]
    advance: Callable[[float], Awaitable[None]]
    unasked: Callable[[], float]  # the most the store's clock has moved on its own since it opened
    opened: list[QuotaStore] = field(default_factory=list)


def _backend(kind: str, tmp_path: Path) -> tuple[Backend, Callable[[], None]]:
    clock = FakeClock()

    async def fake_advance(seconds: float) -> None:
        clock.advance(seconds)

    def still() -> float:
        return 0.0  # a FakeClock moves only when told to

    if kind == "memory":
        memory = MemoryQuotaStore(clock)
        return Backend(memory, lambda: memory, fake_advance, still), lambda: None
    if kind == "sqlite":
        path = tmp_path / "ledger.sqlite3"
        sqlite = SqliteQuotaStore(path, clock)
        return Backend(sqlite, lambda: SqliteQuotaStore(path, clock), fake_advance, still), lambda: None
    require_redis()
    namespace = fresh_namespace()

    def redis_store() -> QuotaStore:
        return RedisQuotaStore(BASE_URL, namespace=namespace)

    opened = server_time()
    return Backend(redis_store(), redis_store, asyncio.sleep, lambda: server_time() - opened), (
        lambda: drop_namespace(namespace)
    )


@pytest.fixture(params=QUOTA_STORE_KINDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made, cleanup = _backend(request.param, tmp_path)
    try:
        yield made
    finally:
        for store in {id(s): s for s in [made.store, *made.opened]}.values():
            await store.close()
        cleanup()
