"""Chunk leases on Postgres: claim a chunk of a job's tasks under a lease, renew it, commit its
results fenced by the lease's token, release it, and return expired leases' tasks to the queue.

Claims take pending rows with `FOR UPDATE SKIP LOCKED`, so workers on any number of machines never
wait on, or double-claim, each other's rows. A commit first locks its lease row (`lease_hold`)
and then writes only tasks still running under that token: a reaper deleting the lease either
waits for the commit or makes it find no lease, so a worker that lost its lease writes nothing.
Expiry is judged on the server's clock unless the store was given a lease clock (tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
import psycopg

from batchgate.errors import LeaseLostError
from batchgate.jobs.store.postgres_schema import Q
from batchgate.jobs.store.protocol import (
    Chunk,
    TaskOutcome,
    TaskSpec,
    check_lease_seconds,
    check_outcome,
    lease_lost,
)

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


class PgChunks:
    """The lease half of `PgJobStore`; the store provides the plumbing declared here."""

    def _conn(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _tx(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    async def _pk(self, conn: Conn, job_id: str) -> int:
        raise NotImplementedError

    async def _take_orders(self, conn: Conn, pk: int, count: int) -> int:
        raise NotImplementedError

    def _lease_now(self) -> float | None:
        raise NotImplementedError

    async def claim_chunk(self, job_id: str, limit: int, *, owner: str, lease_seconds: float) -> Chunk | None:
        check_lease_seconds(lease_seconds)
        async with self._tx() as conn:
            pk = await self._pk(conn, job_id)
            now = self._lease_now()
            await conn.execute(Q["lease_reap"], {"job": pk, "now": now})
            if limit <= 0:
                return None
            lease = {"job": pk, "owner": owner, "now": now, "seconds": lease_seconds}
            row = await (await conn.execute(Q["lease_new"], lease)).fetchone()
            assert row is not None  # INSERT ... RETURNING always returns the row
            token, expires_at = int(row[0]), float(row[1])
            claim = {"job": pk, "limit": limit, "token": token}
            rows = await (await conn.execute(Q["task_claim"], claim)).fetchall()
            if not rows:
                await conn.execute(Q["lease_release"], {"job": pk, "token": token})
                return None
        rows.sort(key=lambda r: r[0])
        tasks = tuple(TaskSpec(r[0], r[1], r[2], orjson.loads(r[3]), r[4], r[5]) for r in rows)
        return Chunk(job_id, token, owner, expires_at, tasks)

    async def renew_lease(self, job_id: str, token: int, lease_seconds: float) -> float:
        check_lease_seconds(lease_seconds)
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            params = {"job": pk, "token": token, "now": self._lease_now(), "seconds": lease_seconds}
            row = await (await conn.execute(Q["lease_renew"], params)).fetchone()
        if row is None:
            raise LeaseLostError(lease_lost(job_id, token))
        return float(row[0])

    async def commit_chunk(self, job_id: str, token: int, outcomes: Sequence[TaskOutcome]) -> None:
        for outcome in outcomes:
            check_outcome(outcome)
        async with self._tx() as conn:
            pk = await self._pk(conn, job_id)
            held = {"job": pk, "token": token, "now": self._lease_now()}
            if await (await conn.execute(Q["lease_hold"], held)).fetchone() is None:
                raise LeaseLostError(lease_lost(job_id, token))
            if not outcomes:
                return
            base = await self._take_orders(conn, pk, len(outcomes))
            params = complete_params(pk, outcomes, base, token)
            if (await conn.execute(Q["task_complete"], params)).rowcount < len({o.seq for o in outcomes}):
                raise LeaseLostError(lease_lost(job_id, token, outside=True))

    async def release_chunk(self, job_id: str, token: int) -> int:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            return (await conn.execute(Q["lease_release"], {"job": pk, "token": token})).rowcount

    async def requeue_expired(self, job_id: str) -> int:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            return (await conn.execute(Q["lease_reap"], {"job": pk, "now": self._lease_now()})).rowcount


def complete_params(
    pk: int, outcomes: Sequence[TaskOutcome], base: int, token: int | None
) -> dict[str, object]:
    """The arrays `task_complete` unnests: one element per outcome, `completed_order` in list order."""
    return {
        "job": pk,
        "token": token,
        "seqs": [o.seq for o in outcomes],
        "states": [o.state.value for o in outcomes],
        "attempts": [o.attempts for o in outcomes],
        "lines": [o.output_line for o in outcomes],
        "errors": [o.error for o in outcomes],
        "providers": [o.provider for o in outcomes],
        "prompt": [o.prompt_tokens for o in outcomes],
        "completion": [o.completion_tokens for o in outcomes],
        "cost": [float(o.cost_usd) for o in outcomes],
        "orders": [base + i for i in range(len(outcomes))],
    }
