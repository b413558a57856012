"""Finished tasks stored at once on SQLite (`add_done`): the answers of a re-run that came from the
response cache go into the job as succeeded tasks, one transaction a chunk, never claimed."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

import orjson

from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec, check_outcome
from batchgate.jobs.store.sqlfile import queries

T = TypeVar("T")
Q = queries()


class SqliteDone:
    """`add_done` of `SqliteJobStore`; the store provides the plumbing declared here."""

    async def _run(self, fn: Callable[[], T]) -> T:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _pk(self, job_id: str) -> int:
        raise NotImplementedError

    async def add_done(
        self, job_id: str, done: Sequence[tuple[TaskSpec, TaskOutcome]], pending: Sequence[TaskSpec] = ()
    ) -> int:
        for _, outcome in done:
            check_outcome(outcome)

        def insert() -> int:
            pk = self._pk(job_id)
            if not done and not pending:
                return 0
            with self._tx() as conn:
                before = conn.total_changes
                waiting = (
                    (pk, s.seq, s.line_no, s.custom_id, orjson.dumps(s.body), s.route, s.step)
                    for s in pending
                )
                conn.executemany(Q["task_insert"], waiting)
                added = conn.total_changes - before
                ((base,),) = conn.execute(Q["job_take_orders"], {"job": pk, "count": len(done)}).fetchall()
                rows = [
                    (pk, s.seq, s.line_no, s.custom_id, orjson.dumps(s.body), s.route, s.step, o.state.value,
                     o.attempts, o.output_line, o.error, o.provider, o.prompt_tokens, o.completion_tokens,
                     o.cost_usd, base + i)
                    for i, (s, o) in enumerate(done)
                ]  # fmt: skip
                before = conn.total_changes  # the orders taken are not tasks
                conn.executemany(Q["task_insert_done"], rows)
                return added + conn.total_changes - before

        return await self._run(insert)
