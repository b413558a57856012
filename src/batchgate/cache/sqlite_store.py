"""The SQLite cache store: one file (WAL, so readers never wait for a writer), bounded by the
bytes of its values, evicting the least recently used first.

Rows go in rowid order (appended: the answers are large), found through a unique index of the
keys. A read marks its keys used at most once a `TOUCH_S` (one `UPDATE ... WHERE key IN (...)` a
chunk, skipping keys touched lately), so a re-run of a freshly filled cache writes nothing while it reads.
The values' total is kept in the `meta` table in the same transaction as each write.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from batchgate.cache.protocol import CacheStats, chunks
from batchgate.clock import wall_time
from batchgate.errors import StoreError

T = TypeVar("T")
TOUCH_S = 60.0  # a key read again within this long is not re-marked (LRU to the minute)
EVICT_STEP = 512  # entries dropped per statement while over the bound
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, value BLOB NOT NULL, written REAL NOT NULL,
    used REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_used ON entries (used);
CREATE INDEX IF NOT EXISTS entries_written ON entries (written);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('bytes', 0);
"""
_PUT = "INSERT OR REPLACE INTO entries (key, value, written, used) VALUES (?, ?, ?, ?)"
_ADD_BYTES = "UPDATE meta SET value = value + ? WHERE name = 'bytes' RETURNING value"


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)
    return conn


class SqliteCacheStore:
    """Create with `await SqliteCacheStore.open(path, max_bytes=...)`."""

    def __init__(
        self, path: Path, conn: sqlite3.Connection, executor: ThreadPoolExecutor, max_bytes: int | None,
        wall: Callable[[], float],
    ) -> None:  # fmt: skip
        self.path = path
        self._conn = conn
        self._executor = executor
        self._max = max_bytes
        self._wall = wall

    @classmethod
    async def open(
        cls, path: str | Path, *, max_bytes: int | None = None, wall: Callable[[], float] = wall_time
    ) -> SqliteCacheStore:
        path = Path(path)
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchgate-cache")
        try:
            conn = await asyncio.get_running_loop().run_in_executor(executor, _connect, path)
        except sqlite3.Error as exc:
            executor.shutdown(wait=False)
            raise StoreError(f"{path}: cannot open the cache ({exc})") from None
        return cls(path, conn, executor, max_bytes, wall)

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._guarded, fn)

    def _guarded(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cache store error ({type(exc).__name__}: {exc})") from None

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        return await self._run(lambda: self._get(keys))

    def _get(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        now = self._wall()
        stale = now - TOUCH_S
        for part in chunks(keys):
            marks = ",".join("?" * len(part))
            rows = self._conn.execute(f"SELECT key, value, used FROM entries WHERE key IN ({marks})", part)
            touch = []
            for key, value, used in rows.fetchall():
                found[key] = value
                if used < stale:
                    touch.append(key)
            if touch:
                marks = ",".join("?" * len(touch))
                self._conn.execute(f"UPDATE entries SET used = ? WHERE key IN ({marks})", (now, *touch))
        return found

    async def put_many(self, entries: Mapping[str, bytes]) -> None:
        if entries:
            await self._run(lambda: self._put(entries))

    def _put(self, entries: Mapping[str, bytes]) -> None:
        now = self._wall()
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            keys = list(entries)
            old = 0
            for part in chunks(keys):
                marks = ",".join("?" * len(part))
                row = conn.execute(f"SELECT SUM(LENGTH(value)) FROM entries WHERE key IN ({marks})", part)
                old += int(row.fetchone()[0] or 0)
            rows = ((k, v, now, now) for k, v in zip(keys, entries.values(), strict=True))
            conn.executemany(_PUT, rows)
            added = sum(len(v) for v in entries.values()) - old
            total = conn.execute(_ADD_BYTES, (added,))
            self._evict(int(total.fetchone()[0]))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _evict(self, total: int) -> None:
        """Drop the least recently used entries until the values fit under the bound."""
        while self._max is not None and total > self._max:
            rows = self._conn.execute(
                "DELETE FROM entries WHERE id IN (SELECT id FROM entries ORDER BY used LIMIT ?) "
                "RETURNING LENGTH(value)",
                (EVICT_STEP if total - self._max > 4096 else 1,),
            ).fetchall()
            if not rows:
                break
            freed = sum(int(r[0]) for r in rows)
            total -= freed
            self._conn.execute("UPDATE meta SET value = value - ? WHERE name = 'bytes'", (freed,))

    async def stats(self) -> CacheStats:
        def read() -> tuple[int, int]:
            n = self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            total = self._conn.execute("SELECT value FROM meta WHERE name = 'bytes'").fetchone()[0]
            return int(n), int(total)

        n, total = await self._run(read)
        return CacheStats(n, total, self._max, str(self.path))

    async def clear(self) -> int:
        return await self.prune(-1.0, everything=True)

    async def prune(self, older_than_s: float, *, everything: bool = False) -> int:
        def drop() -> int:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                cut = float("inf") if everything else self._wall() - older_than_s
                rows = conn.execute("DELETE FROM entries WHERE written < ? RETURNING LENGTH(value)", (cut,))
                sizes = [int(r[0]) for r in rows.fetchall()]
                conn.execute("UPDATE meta SET value = value - ? WHERE name = 'bytes'", (sum(sizes),))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return len(sizes)

        return await self._run(drop)

    async def close(self) -> None:
        try:
            await self._run(self._conn.close)
        finally:
            self._executor.shutdown(wait=False)
