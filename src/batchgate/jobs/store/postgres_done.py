"""Finished tasks stored at once on Postgres (`add_done`): the answers of a re-run that came from
the response cache go into the job as succeeded tasks, one statement a chunk, never claimed."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
import psycopg

from batchgate.jobs.store.postgres_chunks import complete_params
from batchgate.jobs.store.postgres_schema import Q
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec, check_outcome

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


class PgDone:
    """`add_done` of `PgJobStore`; the store provides the plumbing declared here."""

    def _tx(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    async def _pk(self, conn: Conn, job_id: str) -> int:
        raise NotImplementedError

    async def _take_orders(self, conn: Conn, pk: int, count: int) -> int:
        raise NotImplementedError

    async def add_done(
        self, job_id: str, done: Sequence[tuple[TaskSpec, TaskOutcome]], pending: Sequence[TaskSpec] = ()
    ) -> int:
        for _, outcome in done:
            check_outcome(outcome)
        async with self._tx() as conn:
            pk = await self._pk(conn, job_id)
            added = 0
            if pending:
                waiting = {
                    "job": pk,
                    "seqs": [t.seq for t in pending],
                    "lines": [t.line_no for t in pending],
                    "ids": [t.custom_id for t in pending],
                    "bodies": [orjson.dumps(t.body) for t in pending],
                    "routes": [t.route for t in pending],
                    "steps": [t.step for t in pending],
                }
                added = int((await conn.execute(Q["task_insert"], waiting)).rowcount)
            if not done:
                return added
            base = await self._take_orders(conn, pk, len(done))
            specs = [s for s, _ in done]
            params = complete_params(pk, [o for _, o in done], base, None)
            params.update(
                tlines=[s.line_no for s in specs],
                ids=[s.custom_id for s in specs],
                bodies=[orjson.dumps(s.body) for s in specs],
                routes=[s.route for s in specs],
                steps=[s.step for s in specs],
            )
            return added + int((await conn.execute(Q["task_insert_done"], params)).rowcount)
