"""The service's own records, beside the job store: client keys (only their SHA-256), uploaded
files (metadata; the bytes sit in `files/` next to it) and batches (one JSON record each, linked to
the job that runs it). One SQLite file in WAL mode, `server.db` in the service's data folder.

Every call is one short statement on a local file (no call waits on a job), so the registry runs
them on the event loop's thread; the jobs' own data stays in the job store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

import orjson

from batchgate.server.tenancy.sqlite_file import SqliteFile

REGISTRY_FILE = "server.db"
UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
_KNOWN_KEYS = 4096  # keys remembered by their hash


class BatchError(TypedDict):
    """One entry of a failed batch's `errors.data` (OpenAI's shape): a bad input line names its
    `line` (and `param`: None), an empty input `line`: None, a run that failed neither."""

    code: str
    message: str
    param: NotRequired[None]
    line: NotRequired[int | None]


class LineProblem(TypedDict):
    """A bad input line, as `errors.data` lists it."""

    code: str
    message: str
    param: None
    line: int


_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY, hash TEXT UNIQUE NOT NULL, admin INTEGER NOT NULL,
    name TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, owner TEXT NOT NULL,
    filename TEXT NOT NULL, purpose TEXT NOT NULL, bytes INTEGER NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, owner TEXT NOT NULL,
    kind TEXT NOT NULL, status TEXT NOT NULL, record BLOB NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    admin: bool
    name: str


@dataclass(frozen=True, slots=True)
class FileRecord:
    id: str
    owner: str
    filename: str
    purpose: str
    bytes: int
    created_at: int


@dataclass(slots=True)
class BatchRecord:
    """A batch as the service keeps it; `times` holds OpenAI's `*_at` fields once they happen.
    `kind`: the API that made it, `openai` (an input file) or `anthropic` (inline requests)."""

    id: str
    owner: str
    input_file_id: str
    endpoint: str
    completion_window: str
    created_at: int
    job_id: str
    status: str = "validating"
    metadata: dict[str, str] | None = None
    errors: list[BatchError] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    times: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] | None = None  # request_counts, frozen once the batch has ended
    usage: list[int] | None = None  # prompt and completion tokens, frozen with `counts`
    cancel_asked: bool = False
    kind: str = "openai"
    requests: int = 0  # inline requests (Anthropic's API): known before the job exists
    expired: bool = False  # its completion window ended before it did

    @property
    def stopping(self) -> bool:
        """Cancelled or expired: its job stops, what finished is kept."""
        return self.cancel_asked or self.expired

    def to_blob(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def of_blob(cls, blob: bytes) -> BatchRecord:
        return cls(**orjson.loads(blob))


class Registry(SqliteFile):
    """Keys, files and batches in `path` (created with its folder when missing)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA, "service registry")
        self._known_keys: dict[str, ApiKey] = {}
        self._keys_version = -1  # the file's `data_version` the known keys were read at

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction on the registry's connection: what the block writes (through this
        connection or the registry's own methods) commits together or not at all."""
        with self._sql() as c:
            if c.in_transaction:  # nested: part of the enclosing one
                yield c
                return
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
            except BaseException:
                c.execute("ROLLBACK")
                raise
            c.execute("COMMIT")

    # -- keys ------------------------------------------------------------------------------------
    def add_key(self, key: ApiKey, digest: str, created_at: int) -> None:
        with self._sql() as c:
            c.execute(
                "INSERT INTO api_keys (id, hash, admin, name, created_at) VALUES (?, ?, ?, ?, ?)",
                (key.id, digest, int(key.admin), key.name, created_at),
            )

    def key_by_hash(self, digest: str) -> ApiKey | None:
        """The key whose token hashes to `digest`. The keys found are kept (up to `_KNOWN_KEYS`)
        until another connection writes to the file (`PRAGMA data_version` moves: `batchgate keys
        revoke` in another process, say), so a revoked key is refused at its next request, and
        otherwise a request's auth is one pragma, no table read. An unknown digest is asked each
        time (a key made by `batchgate keys create` later is found)."""
        with self._sql() as c:
            version = int(c.execute("PRAGMA data_version").fetchone()[0])
            if version != self._keys_version:
                self._known_keys.clear()
                self._keys_version = version
            found = self._known_keys.get(digest)
            if found is not None:
                return found
            row = c.execute("SELECT id, admin, name FROM api_keys WHERE hash = ?", (digest,)).fetchone()
        if row is None:
            return None
        if len(self._known_keys) >= _KNOWN_KEYS:
            self._known_keys.clear()
        found = self._known_keys[digest] = ApiKey(row[0], bool(row[1]), row[2])
        return found

    def revoke_key(self, key_id: str) -> bool:
        """Remove the key `key_id` (its files and batches stay); False if there is no such key."""
        with self._sql() as c:
            done = c.execute("DELETE FROM api_keys WHERE id = ?", (key_id,))
        self._known_keys.clear()
        return done.rowcount > 0

    # -- files -----------------------------------------------------------------------------------
    def add_file(self, f: FileRecord) -> None:
        with self._sql() as c:
            c.execute(
                "INSERT OR REPLACE INTO files (id, owner, filename, purpose, bytes, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (f.id, f.owner, f.filename, f.purpose, f.bytes, f.created_at),
            )

    def get_file(self, file_id: str) -> FileRecord | None:
        with self._sql() as c:
            row = c.execute(
                "SELECT id, owner, filename, purpose, bytes, created_at FROM files WHERE id = ?", (file_id,)
            ).fetchone()
        return None if row is None else FileRecord(*row)

    def page_files(
        self, owner: str | None, limit: int, after: str | None = None
    ) -> tuple[list[FileRecord], bool]:
        """Up to `limit` files of `owner` (all owners for None), newest first, the next older ones
        after the file `after`; and whether more follow."""
        where, args = ["1 = 1"], list[object]()
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if after is not None:
            where.append("seq < (SELECT seq FROM files WHERE id = ?)")
            args.append(after)
        sql = f"SELECT id, owner, filename, purpose, bytes, created_at FROM files WHERE {' AND '.join(where)}"
        with self._sql() as c:
            rows = c.execute(sql + " ORDER BY seq DESC LIMIT ?", (*args, limit + 1)).fetchall()
        return [FileRecord(*row) for row in rows[:limit]], len(rows) > limit

    def stored(self, owner: str) -> tuple[int, int]:
        """How many files `owner` has, and their bytes."""
        with self._sql() as c:
            row = c.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM files WHERE owner = ?", (owner,))
            count, size = row.fetchone()
        return int(count), int(size)

    def in_flight(self, owner: str) -> int:
        """How many of `owner`'s batches and jobs have not ended (scheduled ones included)."""
        marks = ", ".join("?" for _ in (*UNFINISHED, "scheduled", "paused"))
        with self._sql() as c:
            sql = f"SELECT COUNT(*) FROM batches WHERE owner = ? AND status IN ({marks})"
            row = c.execute(sql, (owner, *UNFINISHED, "scheduled", "paused")).fetchone()
        return int(row[0])

    def delete_file(self, file_id: str) -> None:
        with self._sql() as c:
            c.execute("DELETE FROM files WHERE id = ?", (file_id,))

    # -- batches ---------------------------------------------------------------------------------
    def add_batch(self, b: BatchRecord) -> None:
        with self._sql() as c:
            c.execute(
                "INSERT INTO batches (id, owner, kind, status, record) VALUES (?, ?, ?, ?, ?)",
                (b.id, b.owner, b.kind, b.status, b.to_blob()),
            )

    def save_batch(self, b: BatchRecord) -> None:
        with self._sql() as c:
            c.execute("UPDATE batches SET status = ?, record = ? WHERE id = ?", (b.status, b.to_blob(), b.id))

    def get_batch(self, batch_id: str) -> BatchRecord | None:
        with self._sql() as c:
            row = c.execute("SELECT record FROM batches WHERE id = ?", (batch_id,)).fetchone()
        return None if row is None else BatchRecord.of_blob(row[0])

    def list_batches(
        self, kind: str, owner: str | None, limit: int, *, after: str | None = None, before: str | None = None
    ) -> tuple[list[BatchRecord], bool]:
        """Up to `limit` batches of `kind` and `owner` (all owners for None), newest first: the
        next older ones after the batch `after`, or the next newer ones before `before`; and
        whether more follow in that direction."""
        where, args = ["kind = ?"], [kind]
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if after is not None:
            where.append("seq < (SELECT seq FROM batches WHERE id = ?)")
            args.append(after)
        if before is not None:
            where.append("seq > (SELECT seq FROM batches WHERE id = ?)")
            args.append(before)
        order = "ASC" if before is not None and after is None else "DESC"
        sql = f"SELECT record FROM batches WHERE {' AND '.join(where)} ORDER BY seq {order} LIMIT ?"
        with self._sql() as c:
            rows = c.execute(sql, (*args, limit + 1)).fetchall()
        found = [BatchRecord.of_blob(r[0]) for r in rows[:limit]]
        return (found[::-1] if order == "ASC" else found), len(rows) > limit

    def unfinished_batches(self) -> list[BatchRecord]:
        """Batches a stopped server left running, oldest first (they resume at start)."""
        marks = ", ".join("?" for _ in UNFINISHED)
        with self._sql() as c:
            rows = c.execute(f"SELECT record FROM batches WHERE status IN ({marks}) ORDER BY seq", UNFINISHED)
            return [BatchRecord.of_blob(r[0]) for r in rows]
