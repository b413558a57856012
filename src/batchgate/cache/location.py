"""A cache store from its name: `redis://...` (or `rediss://`) is Redis, `memory` the process's own,
anything else a SQLite file path."""

from __future__ import annotations

from pathlib import Path

from batchgate.cache.memory import MemoryCacheStore
from batchgate.cache.protocol import CacheStore
from batchgate.cache.redis_store import DEFAULT_NAMESPACE, RedisCacheStore
from batchgate.cache.sqlite_store import SqliteCacheStore

DEFAULT_MAX_BYTES = 1 << 30  # a SQLite cache's default bound: 1 GiB of answers


def is_redis(name: str) -> bool:
    return name.startswith(("redis://", "rediss://", "unix://"))


async def open_cache(
    name: str, *, max_bytes: int | None = DEFAULT_MAX_BYTES, namespace: str = DEFAULT_NAMESPACE
) -> CacheStore:
    if is_redis(name):
        return RedisCacheStore(name, namespace)
    if name == "memory":
        return MemoryCacheStore(max_bytes)
    return await SqliteCacheStore.open(Path(name).expanduser(), max_bytes=max_bytes)
