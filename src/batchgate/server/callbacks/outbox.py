"""The callbacks' durable state in `server.db`: the outbox (one row per event, written in the same
transaction that records the end of its batch or job, so a crash can lose neither) and each client
key's webhook secret (kept as is: it signs; it is shown once, at `batchgate keys create`, and
never appears in a response, a log line or an error).

An event is `pending` until an attempt is answered with a 2xx (`delivered`) or it is given up
(`failed`: refused by the SSRF guard, redirected, or unanswered until the retry window ended);
`attempts`, `next_at` (wall-clock seconds) and `last_error` say where its delivery stands.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from batchgate.config.schema import Secret
from batchgate.server.tenancy.registry import Registry

SCHEMA = """
CREATE TABLE IF NOT EXISTS callback_outbox (
    id TEXT PRIMARY KEY, object_id TEXT NOT NULL, owner TEXT NOT NULL, url TEXT NOT NULL,
    body BLOB NOT NULL, created_at REAL NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL,
    next_at REAL NOT NULL, last_error TEXT);
CREATE INDEX IF NOT EXISTS callback_outbox_due ON callback_outbox (state, next_at);
CREATE TABLE IF NOT EXISTS webhook_secrets (key_id TEXT PRIMARY KEY, secret TEXT NOT NULL);
"""
_COLUMNS = "id, object_id, owner, url, body, created_at, state, attempts, next_at, last_error"


@dataclass(frozen=True, slots=True)
class Event:
    """One callback to deliver: `body` is signed as stored, the same bytes on every attempt."""

    id: str
    object_id: str
    owner: str
    url: str
    body: bytes
    created_at: float
    state: str = "pending"
    attempts: int = 0
    next_at: float = 0.0
    last_error: str | None = None


def ensure_schema(registry: Registry) -> None:
    with registry.transaction() as c:
        for statement in SCHEMA.split(";"):
            if statement.strip():
                c.execute(statement)


def add(conn: sqlite3.Connection, e: Event) -> None:
    """Inside the caller's transaction (the one that records the end)."""
    conn.execute(
        f"INSERT INTO callback_outbox ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            e.id,
            e.object_id,
            e.owner,
            e.url,
            e.body,
            e.created_at,
            e.state,
            e.attempts,
            e.next_at,
            e.last_error,
        ),
    )


class Outbox:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        ensure_schema(registry)

    def get(self, event_id: str) -> Event | None:
        with self.registry.transaction() as c:
            row = c.execute(f"SELECT {_COLUMNS} FROM callback_outbox WHERE id = ?", (event_id,)).fetchone()
        return None if row is None else Event(*row)

    def of_object(self, object_id: str) -> list[Event]:
        with self.registry.transaction() as c:
            rows = c.execute(
                f"SELECT {_COLUMNS} FROM callback_outbox WHERE object_id = ? ORDER BY created_at",
                (object_id,),
            ).fetchall()
        return [Event(*row) for row in rows]

    def due(
        self, now: float, skip: Collection[str], limit: int, busy: Mapping[str, int], per_owner: int
    ) -> list[Event]:
        """Pending events whose next attempt is due, but those in `skip` (in flight), taken in turn
        from each owner (each one's oldest first), an owner's while it has fewer than `per_owner`
        in flight (`busy`: each owner's in flight now)."""
        with self.registry.transaction() as c:
            rows = c.execute(
                f"SELECT {_COLUMNS} FROM (SELECT {_COLUMNS},"
                " ROW_NUMBER() OVER (PARTITION BY owner ORDER BY next_at) AS n FROM callback_outbox"
                " WHERE state = 'pending' AND next_at <= ?) WHERE n <= ? ORDER BY n, next_at",
                (now, per_owner + len(skip)),
            ).fetchall()
        started: dict[str, int] = dict(busy)
        taken: list[Event] = []
        for event in (Event(*row) for row in rows):
            if event.id not in skip and started.get(event.owner, 0) < per_owner and len(taken) < limit:
                started[event.owner] = started.get(event.owner, 0) + 1
                taken.append(event)
        return taken

    def next_at(self, skip: Collection[str], full: Collection[str] = ()) -> float | None:
        """When the next pending event not in `skip`, of an owner not in `full`, is due."""
        marks = ",".join("?" * len(full))
        with self.registry.transaction() as c:
            rows = c.execute(
                "SELECT id, next_at FROM callback_outbox WHERE state = 'pending'"
                f" AND owner NOT IN ({marks}) ORDER BY next_at LIMIT ?",
                (*full, len(skip) + 1),
            ).fetchall()
        return next((float(at) for event_id, at in rows if event_id not in skip), None)

    def pending(self) -> int:
        """How many events are still to deliver."""
        with self.registry.transaction() as c:
            row = c.execute("SELECT COUNT(*) FROM callback_outbox WHERE state = 'pending'").fetchone()
        return int(row[0])

    def record(self, event_id: str, state: str, attempts: int, next_at: float, error: str | None) -> None:
        with self.registry.transaction() as c:
            c.execute(
                "UPDATE callback_outbox SET state = ?, attempts = ?, next_at = ?, last_error = ?"
                " WHERE id = ?",
                (state, attempts, next_at, error, event_id),
            )

    # -- secrets ---------------------------------------------------------------------------------
    def set_secret(self, key_id: str, secret: str) -> bool:
        """Store (or replace) the secret of the client key `key_id`; False if there is no such key."""
        with self.registry.transaction() as c:
            done = c.execute(
                "INSERT OR REPLACE INTO webhook_secrets (key_id, secret)"
                " SELECT id, ? FROM api_keys WHERE id = ?",
                (secret, key_id),
            )
            return done.rowcount > 0

    def secret(self, key_id: str) -> Secret | None:
        """The key's webhook secret, as a `Secret` (its repr and str say `***`, so no log line,
        error or traceback can show it); None when the key has none."""
        with self.registry.transaction() as c:
            row = c.execute("SELECT secret FROM webhook_secrets WHERE key_id = ?", (key_id,)).fetchone()
        return None if row is None else Secret(str(row[0]))
