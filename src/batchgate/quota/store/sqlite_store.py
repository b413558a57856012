"""The machine-local quota store: a small SQLite ledger every process on this machine shares.

Each `apply` is one `BEGIN IMMEDIATE` transaction (the writers queue on SQLite's lock, so it is
atomic across processes) running `ledger.apply` on the quota's rows. Time is the injected
clock's `now()`: the event loop's monotonic clock, which every process on a machine shares
(CLOCK_MONOTONIC on Linux, the same on macOS and Windows). The ledger holds only bucket levels
and pauses — losing it loses nothing — so it is written without fsync.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from batchgate.clock import Clock
from batchgate.errors import QuotaStoreUnavailable
from batchgate.quota.store.ledger import DimState, QuotaState, apply
from batchgate.quota.store.protocol import Pace, Settle

_SCHEMA = """
CREATE TABLE IF NOT EXISTS quota_buckets (
    quota TEXT NOT NULL, dim TEXT NOT NULL, level REAL NOT NULL, updated REAL NOT NULL,
    rate REAL NOT NULL, capacity REAL NOT NULL, top REAL NOT NULL, held REAL NOT NULL,
    PRIMARY KEY (quota, dim));
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

    async def apply(
        self, quota: str, paces: Mapping[str, Pace], take: Mapping[str, float] | None, settle: Settle
    ) -> float:
        try:
            return self._apply(quota, paces, take, settle)
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            raise self._unavailable(exc) from exc

    def _apply(
        self, quota: str, paces: Mapping[str, Pace], take: Mapping[str, float] | None, settle: Settle
    ) -> float:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        state = QuotaState()
        rows = db.execute(
            "SELECT dim, level, updated, rate, capacity, top, held FROM quota_buckets WHERE quota = ?",
            (quota,),
        )
        for dim, *values in rows:
            state.dims[dim] = DimState(*values)
        paused = db.execute("SELECT until FROM quota_pauses WHERE quota = ?", (quota,)).fetchone()
        state.paused_until = paused[0] if paused else -math.inf
        wait = apply(state, self._clock.now(), paces, take, settle)
        db.executemany(
            "INSERT OR REPLACE INTO quota_buckets VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (quota, n, d.level, d.updated, d.rate, d.capacity, d.top, max(d.held, -1e300))
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
