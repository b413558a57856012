"""Opening an SQLite job database: create it 0600, check it is ours, migrate it, classify errors.

A file that is not SQLite, an SQLite file with foreign tables, one from a newer batchgate, or a
corrupted one each becomes a `StoreError` naming the file. Errors are classified by SQLite's
error code, never by message text. `schema` builds a fresh database; older ones get the
`migration_NNNN` blocks they lack, in order, inside one transaction.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from batchgate.errors import StoreError
from batchgate.jobs.store.sqlfile import migrations, queries, split_statements

_SQLITE_MAGIC = b"SQLite format 3\x00"
Q = queries()
MIGRATIONS = migrations(Q)
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """Open, check and migrate the database file (runs in the store's thread)."""
    _prepare_file(path)
    try:
        conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise store_error(path, exc) from None
    try:
        _refuse_foreign(path, conn)  # before WAL: never modify a database that is not ours
        mode = conn.execute(Q["set_wal"]).fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise StoreError(f"{path}: cannot switch the job database to WAL mode")
        conn.execute(Q["set_synchronous"])
        _migrate(path, conn)
    except sqlite3.Error as exc:
        conn.close()
        if getattr(exc, "sqlite_errorcode", -1) & 0xFF == sqlite3.SQLITE_NOTADB and _not_sqlite(path):
            raise StoreError(f"{path}: not a batchgate job database (not an SQLite file)") from None
        raise store_error(path, exc) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare_file(path: Path) -> None:
    """Create the file 0600 if missing; refuse a directory. An existing file is never opened here:
    closing any descriptor of a file drops every POSIX lock this process holds on it, so a raw
    open/close beside a live connection (a server opens the store once per job) silently released
    that connection's WAL read lock, and another process closing the database last then
    checkpointed and deleted the WAL under it ("corrupted or not a batchgate job database")."""
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not a job database")
    if path.exists():
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return  # created meanwhile by another opener
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the job database ({exc.strerror})") from None
    os.close(fd)  # a new, empty file: no connection of this process can hold a lock on it


def _not_sqlite(path: Path) -> bool:
    """Whether the file does not start with SQLite's header (read only after SQLite refused it)."""
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError:
        return False
    return bool(head) and head != _SQLITE_MAGIC


def _refuse_foreign(path: Path, conn: sqlite3.Connection) -> set[str]:
    """The database's tables; StoreError if it holds tables and they are not batchgate's."""
    tables = {row[0] for row in conn.execute(Q["list_tables"])}
    if tables and not {"schema_version", "jobs"} <= tables:
        raise StoreError(f"{path}: not a batchgate job database (it holds other tables)")
    return tables


def _migrate(path: Path, conn: sqlite3.Connection) -> None:
    conn.execute(Q["begin_write"])
    try:
        tables = _refuse_foreign(path, conn)
        version = -1 if not tables else int(conn.execute(Q["get_schema_version"]).fetchone()[0] or 0)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path}: made by a newer batchgate "
                f"(schema version {version}; this one knows {SCHEMA_VERSION})"
            )
        scripts = [Q["schema"]] if version < 0 else MIGRATIONS[version:]
        for script in scripts:
            for statement in split_statements(script):
                conn.execute(statement)
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.rollback()
        raise
    conn.execute(Q["commit"])


def store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """Classify by SQLite's (primary) error code, never by message text."""
    code = getattr(exc, "sqlite_errorcode", -1) & 0xFF
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreError(f"{path}: the job database is locked by another process (is another run using it?)")
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return StoreError(f"{path}: the job database is corrupted or not a batchgate job database")
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
        return StoreError(f"{path}: cannot write the job database (read-only or no permission)")
    if code == sqlite3.SQLITE_FULL:
        return StoreError(f"{path}: the disk is full")
    return StoreError(f"{path}: job database error: {exc}")
