"""Job run locks on Postgres: session advisory locks held on one dedicated connection.

`lock_job` is synchronous (the engine holds it as a plain `with`), so the locks live on a
synchronous psycopg connection opened on first use; taking or freeing one is a single round trip.
A lock dies with its session, so a killed run frees its jobs. Advisory locks nest within one
session, so a second hold through the same store is refused here, as another run's would be.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from batchgate.errors import JobLockedError, StoreError
from batchgate.jobs.store.postgres_schema import Q, lock_key, store_error


class PgJobLocks:
    def __init__(self, url: str, schema: str, where: str) -> None:
        self._url = url
        self._schema = schema
        self._where = where
        self._held: set[str] = set()
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._closed = False

    @property
    def held(self) -> list[str]:
        return sorted(self._held)

    @contextmanager
    def hold(self, job_id: str) -> Iterator[None]:
        """Hold the job; `JobLockedError` naming it if any session (this store's too) holds it."""
        if job_id in self._held:
            raise JobLockedError(f"job {job_id!r} is locked by another batchgate run")
        key = lock_key(self._schema, job_id)
        conn = self._connection()
        if not self._call(conn, "job_lock", key):
            raise JobLockedError(f"job {job_id!r} is locked by another batchgate run")
        self._held.add(job_id)
        try:
            yield
        finally:
            self._held.discard(job_id)
            if not self._closed and not conn.closed:
                self._call(conn, "job_unlock", key)

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._closed:
            raise StoreError(f"{self._where}: the job store is closed")
        if self._conn is None or self._conn.closed:
            try:
                self._conn = psycopg.connect(self._url, autocommit=True)
            except psycopg.Error as exc:
                raise store_error(self._where, exc) from None
        return self._conn

    def _call(self, conn: psycopg.Connection[tuple[Any, ...]], name: str, key: int) -> bool:
        try:
            row = conn.execute(Q[name], {"key": key}).fetchone()
        except psycopg.Error as exc:
            raise store_error(self._where, exc) from None
        return bool(row and row[0])

    def close(self) -> None:
        """End the session: every lock it holds goes with it."""
        self._closed = True
        self._held.clear()
        if self._conn is not None:
            self._conn.close()
