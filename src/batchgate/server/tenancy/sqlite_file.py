"""The service's own SQLite file (`server.db`): opened once per owner in autocommit mode with WAL and
its schema applied, every SQLite error turned into a `StoreError` naming the file; created 0600
(it holds webhook secrets), whatever the umask. The registry
(keys, files, batches) and the native jobs' table both build on it."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from batchgate.errors import StoreError


class SqliteFile:
    def __init__(self, path: Path, schema: str, what: str) -> None:
        """Open `path` (and its folder, when missing) with `schema`; `what` names it in errors."""
        self.path = path
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _owner_only(path)
            self._conn = sqlite3.connect(path, timeout=5.0, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(schema)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{path}: cannot open the {what} ({exc})") from None

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _sql(self) -> Iterator[sqlite3.Connection]:
        try:
            yield self._conn
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc}") from None


def _owner_only(path: Path) -> None:
    """Create the file 0600 before SQLite opens it (SQLite gives its -wal and -shm files the main
    file's mode), whatever the umask; an older file left wider is narrowed by `chmod`, which opens
    no descriptor (closing one would drop this process's SQLite locks on the file)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        for existing in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            with contextlib.suppress(OSError):
                if existing.stat().st_mode & 0o077:
                    existing.chmod(0o600)
        return
    os.close(fd)
