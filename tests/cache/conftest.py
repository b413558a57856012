"""The cache store fixture: every conformance test runs against each CacheStore (memory, SQLite,
Redis), each on a wall clock the test moves (`Backend.wall`), each backend with its marker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from batchgate.cache.memory import MemoryCacheStore
from batchgate.cache.protocol import CacheStore
from batchgate.cache.redis_store import RedisCacheStore
from batchgate.cache.sqlite_store import SqliteCacheStore
from redisutil import BASE_URL, drop_namespace, fresh_namespace, require_redis

CACHE_STORE_KINDS = [
    pytest.param("memory", marks=pytest.mark.memory),
    pytest.param("sqlite", marks=pytest.mark.sqlite),
    pytest.param("redis", marks=pytest.mark.redis),
]
BOUND = 1000  # bytes: the bounded stores' limit in the suite


@dataclass
class Wall:
    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    kind: str
    store: CacheStore
    wall: Wall
    reopen: Callable[[], Awaitable[CacheStore]]  # another handle on the same cache (another process)
    bounded: bool  # the store itself keeps to BOUND (Redis leaves it to the server's maxmemory)


@pytest.fixture(params=CACHE_STORE_KINDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    kind: str = request.param
    wall = Wall()
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    opened: list[CacheStore] = []
    if kind == "memory":
        memory = MemoryCacheStore(BOUND, wall=wall)

        async def same() -> CacheStore:
            return memory

        made = Backend(kind, memory, wall, same, True)
    elif kind == "sqlite":
        path = tmp_path / "cache.db"

        async def sqlite() -> CacheStore:
            store = await SqliteCacheStore.open(path, max_bytes=BOUND, wall=wall)
            opened.append(store)
            return store

        made = Backend(kind, await sqlite(), wall, sqlite, True)
    else:
        require_redis()
        namespace = fresh_namespace()

        async def redis() -> CacheStore:
            store = RedisCacheStore(BASE_URL, namespace, wall=wall)
            opened.append(store)
            return store

        made = Backend(kind, await redis(), wall, redis, False)
        cleanup = lambda: drop_namespace(namespace)  # noqa: E731
    try:
        yield made
    finally:
        for store in opened or [made.store]:
            await store.close()
        cleanup()
