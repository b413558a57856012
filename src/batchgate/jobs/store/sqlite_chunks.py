"""Chunk leases on SQLite: claim a chunk of a job's tasks under a lease, renew it, commit its
results fenced by the lease's token, release it, and return expired leases' tasks to the queue.

SQLite has no row locks to skip: each call is one `BEGIN IMMEDIATE` transaction, which holds the
database's single write lock, so processes sharing the file take turns and never double-claim.
Tokens come from an AUTOINCREMENT key, so they grow and are never reused. Lease time is the
store's wall clock (one machine shares one clock).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

import orjson

from batchgate.errors import LeaseLostError
from batchgate.jobs.store.protocol import (
    Chunk,
    TaskOutcome,
    TaskSpec,
    check_lease_seconds,
    check_outcome,
    lease_lost,
)
from batchgate.jobs.store.sqlfile import queries

T = TypeVar("T")
Q = queries()


class SqliteChunks:
    """The lease half of `SqliteJobStore`; the store provides the plumbing declared here."""

    _wall: Callable[[], float]

    async def _run(self, fn: Callable[[], T]) -> T:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _pk(self, job_id: str) -> int:
        raise NotImplementedError

    async def claim_chunk(self, job_id: str, limit: int, *, owner: str, lease_seconds: float) -> Chunk | None:
        check_lease_seconds(lease_seconds)

        def claim() -> Chunk | None:
            pk, now = self._pk(job_id), self._wall()
            with self._tx() as conn:
                _reap(conn, pk, now)
                if limit <= 0:
                    return None
                lease = {"job": pk, "owner": owner, "now": now, "seconds": lease_seconds}
                token, expires_at = conn.execute(Q["lease_new"], lease).fetchone()
                rows = conn.execute(Q["task_claim"], {"job": pk, "limit": limit, "token": token}).fetchall()
                if not rows:
                    conn.execute(Q["lease_release"], {"job": pk, "token": token})
                    return None
            rows.sort(key=lambda r: r[0])
            tasks = tuple(TaskSpec(r[0], r[1], r[2], orjson.loads(r[3]), r[4], r[5]) for r in rows)
            return Chunk(job_id, int(token), owner, float(expires_at), tasks)

        return await self._run(claim)

    async def renew_lease(self, job_id: str, token: int, lease_seconds: float) -> float:
        check_lease_seconds(lease_seconds)

        def renew() -> float:
            params = {"job": self._pk(job_id), "token": token, "now": self._wall(), "seconds": lease_seconds}
            with self._tx() as conn:
                row = conn.execute(Q["lease_renew"], params).fetchone()
            if row is None:
                raise LeaseLostError(lease_lost(job_id, token))
            return float(row[0])

        return await self._run(renew)

    async def commit_chunk(self, job_id: str, token: int, outcomes: Sequence[TaskOutcome]) -> None:
        for outcome in outcomes:
            check_outcome(outcome)

        def commit() -> None:
            pk = self._pk(job_id)
            with self._tx() as conn:
                held = {"job": pk, "token": token, "now": self._wall()}
                if conn.execute(Q["lease_held"], held).fetchone() is None:
                    raise LeaseLostError(lease_lost(job_id, token))
                if not outcomes:
                    return
                orders = {"job": pk, "count": len(outcomes)}
                ((base,),) = conn.execute(Q["job_take_orders"], orders).fetchall()
                rows = [
                    (o.state.value, o.attempts, o.output_line, o.error, o.provider, o.prompt_tokens,
                     o.completion_tokens, o.cost_usd, base + i, pk, o.seq, token)
                    for i, o in enumerate(outcomes)
                ]  # fmt: skip
                before = conn.total_changes
                conn.executemany(Q["chunk_complete"], rows)
                if conn.total_changes - before < len(rows):  # rolled back by _tx: all or nothing
                    raise LeaseLostError(lease_lost(job_id, token, outside=True))

        await self._run(commit)

    async def release_chunk(self, job_id: str, token: int) -> int:
        def release() -> int:
            params = {"job": self._pk(job_id), "token": token}
            with self._tx() as conn:
                moved = conn.execute(Q["lease_release_tasks"], params).rowcount
                conn.execute(Q["lease_release"], params)
            return moved

        return await self._run(release)

    async def requeue_expired(self, job_id: str) -> int:
        def reap() -> int:
            pk, now = self._pk(job_id), self._wall()
            with self._tx() as conn:
                return _reap(conn, pk, now)

        return await self._run(reap)


def _reap(conn: sqlite3.Connection, pk: int, now: float) -> int:
    moved = conn.execute(Q["lease_reap_tasks"], {"job": pk, "now": now}).rowcount
    conn.execute(Q["lease_reap"], {"job": pk, "now": now})
    return moved
