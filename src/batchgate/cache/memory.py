"""The in-memory cache store: one process's cache (tests, the library's default), bounded and LRU."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

from batchgate.cache.protocol import CacheStats
from batchgate.clock import wall_time


class MemoryCacheStore:
    def __init__(self, max_bytes: int | None = None, *, wall: Callable[[], float] = wall_time) -> None:
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()  # LRU order: oldest first
        self._bytes = 0
        self._max = max_bytes
        self._wall = wall

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        entries = self._entries
        for key in keys:
            hit = entries.get(key)
            if hit is not None:
                entries.move_to_end(key)
                found[key] = hit[0]
        return found

    async def put_many(self, entries: Mapping[str, bytes]) -> None:
        now = self._wall()
        for key, value in entries.items():
            self._drop(key)
            self._entries[key] = (value, now)
            self._bytes += len(value)
        if self._max is not None:
            while self._bytes > self._max and self._entries:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> bool:
        old = self._entries.pop(key, None)
        if old is None:
            return False
        self._bytes -= len(old[0])
        return True

    async def stats(self) -> CacheStats:
        return CacheStats(len(self._entries), self._bytes, self._max, "memory")

    async def clear(self) -> int:
        n = len(self._entries)
        self._entries.clear()
        self._bytes = 0
        return n

    async def prune(self, older_than_s: float) -> int:
        cut = self._wall() - older_than_s
        old = [k for k, (_, written) in self._entries.items() if written < cut]
        for key in old:
            self._drop(key)
        return len(old)

    async def close(self) -> None:
        return None
