"""The cache store seam: `CacheStore`, which every backend implements (memory, SQLite, Redis) and
`tests/cache/test_cache_store_conformance.py` checks alike.

Semantics every store honours:
- `get_many` answers a whole chunk of keys in one round trip (SQLite `IN (...)`, Redis `MGET`);
  absent keys are left out of the answer. A key read is marked used (LRU).
- `put_many` writes a chunk at once; a key already present is replaced.
- A bounded store (`max_bytes`) evicts the least recently used entries until its values' bytes
  fit; an entry bigger than the bound is not kept.
- `prune(older_than_s)` drops entries written more than that many seconds ago; `clear` drops all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

LOOKUP_CHUNK = 2048  # keys asked in one round trip (SQLite's variable limit is 32,766)


@dataclass(frozen=True, slots=True)
class CacheStats:
    entries: int
    bytes: int
    max_bytes: int | None  # None: unbounded (Redis leaves it to the server's maxmemory policy)
    location: str


@runtime_checkable
class CacheStore(Protocol):
    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The values of the keys present, in one round trip per `LOOKUP_CHUNK` keys."""
        ...

    async def put_many(self, entries: Mapping[str, bytes]) -> None:
        """Store (or replace) entries at once, then evict down to the bound."""
        ...

    async def stats(self) -> CacheStats: ...

    async def clear(self) -> int:
        """Drop every entry; returns how many."""
        ...

    async def prune(self, older_than_s: float) -> int:
        """Drop entries written more than `older_than_s` seconds ago; returns how many."""
        ...

    async def close(self) -> None: ...


def chunks(keys: Sequence[str], size: int = LOOKUP_CHUNK) -> list[Sequence[str]]:
    return [keys[i : i + size] for i in range(0, len(keys), size)]
