"""The machine-local quota store: a small SQLite ledger every process on this machine shares.

Each `apply` is one `BEGIN IMMEDIATE` transaction (the writers queue on SQLite's lock, so it is
atomic across processes) running `ledger.apply` on the quota's rows: one per dimension, its
window log as a JSON column (a second's admissions: tens of entries). Time is the injected
clock's `now()`: the event loop's monotonic clock, which every process on a machine shares
(CLOCK_MONOTONIC on Linux, the same on macOS and Windows). The ledger holds only bucket levels,
window logs and pauses — losing it loses nothing — so it is written without fsync, and a ledger
from an older batchgate is simply replaced.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Mapping
from pathlib import Path

import orjson

from batchgate.clock import Clock
from batchgate.errors import QuotaStoreUnavailable
from batchgate.quota.store.ledger import DimState, QuotaState, apply
from batchgate.quota.store.protocol import Pace, Settle, Take

_SCHEMA = """
DROP TABLE IF EXISTS quota_buckets;
CREATE TABLE IF NOT EXISTS quota_dims (
    quota TEXT NOT NULL, dim TEXT NOT NULL, level REAL NOT NULL, updated REAL NOT NULL,
    rate REAL NOT NULL, capacity REAL NOT NULL, top REAL NOT NULL, held REAL NOT NULL,
    window REAL, log TEXT NOT NULL, PRIMARY KEY (quota, dim));
CREATE TABLE IF NOT EXISTS quota_pauses (quota TEXT PRIMARY KEY, until REAL NOT NULL);
"""
_BUSY_TIMEOUT = 10.0  # seconds a transaction waits for another process's (each takes microseconds)


class SqliteQuotaStore:
    """See the module docstring."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self.path = path
        self._clock = clock
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=_BUSY_TIMEOUT, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=OFF")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise self._unavailable(exc) from exc

    async def apply(self, quota: str, paces: Mapping[str, Pace], take: Take | None, settle: Settle) -> float:
        try:
            return self._apply(quota, paces, take, settle)
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            raise self._unavailable(exc) from exc

    def _apply(self, quota: str, paces: Mapping[str, Pace], take: Take | None, settle: Settle) -> float:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        state = QuotaState()
        rows = db.execute(
            "SELECT dim, level, updated, rate, capacity, top, held, window, log FROM quota_dims "
            "WHERE quota = ?",
            (quota,),
        )
        for dim, level, updated, rate, capacity, top, held, stored_window, log in rows:
            window = math.inf if stored_window is None else stored_window
            state.dims[dim] = DimState(level, updated, rate, capacity, top, held, window, orjson.loads(log))
        paused = db.execute("SELECT until FROM quota_pauses WHERE quota = ?", (quota,)).fetchone()
        state.paused_until = paused[0] if paused else -math.inf
        wait = apply(state, self._clock.now(), paces, take, settle)
        db.executemany(
            "INSERT OR REPLACE INTO quota_dims VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    quota,
                    n,
                    d.level,
                    d.updated,
                    d.rate,
                    d.capacity,
                    d.top,
                    max(d.held, -1e300),
                    d.window if math.isfinite(d.window) else None,
                    orjson.dumps(d.log).decode(),
                )
                for n, d in state.dims.items()
            ],
        )
        if math.isfinite(state.paused_until):
            db.execute("INSERT OR REPLACE INTO quota_pauses VALUES (?, ?)", (quota, state.paused_until))
        db.execute("COMMIT")
        return wait

    def describe(self) -> str:
        return f"sqlite:{self.path}"

    def _unavailable(self, exc: BaseException) -> QuotaStoreUnavailable:
        return QuotaStoreUnavailable(
            f"the machine's quota ledger {self.path} is unusable ({type(exc).__name__}: {exc}); "
            "nothing more is sent — batchgate never falls back to a per-process limit "
            "(use `--quota memory` to run alone on purpose)"
        )

    async def close(self) -> None:
        self._db.close()

    def __repr__(self) -> str:
        return f"SqliteQuotaStore({str(self.path)!r})"
