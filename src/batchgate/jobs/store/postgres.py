"""`PgJobStore`: the job store on Postgres (psycopg 3, async), for jobs shared between machines.

Only named queries from `postgres_queries.sql` run here; `postgres_schema` opens, checks and migrates the
schema (the one the URL's search_path selects, e.g. `?options=-csearch_path%3Dmine`) and turns
psycopg errors into `StoreError`s that name the store without its password. A small connection
pool lets concurrent calls run side by side: claims use `FOR UPDATE SKIP LOCKED`, so callers in
any number of processes never block on, or double-claim, each other's tasks. Job run locks are
session advisory locks (`postgres_locks`). Chunk leases live in `postgres_chunks`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

import orjson
import psycopg
from psycopg_pool import AsyncConnectionPool

from batchgate.clock import wall_time
from batchgate.errors import JobError, StoreError
from batchgate.jobs.store.options import JobOptions
from batchgate.jobs.store.postgres_chunks import PgChunks, complete_params
from batchgate.jobs.store.postgres_done import PgDone
from batchgate.jobs.store.postgres_locks import PgJobLocks
from batchgate.jobs.store.postgres_schema import Q, prepare, store_error
from batchgate.jobs.store.protocol import (
    JobRecord,
    TaskOutcome,
    TaskRecord,
    TaskSpec,
    TaskState,
    check_outcome,
    check_status,
)
from batchgate.urls import without_password

_ADD_CHUNK = 10_000
_READ_CHUNK = 1_000
Conn = psycopg.AsyncConnection[tuple[Any, ...]]


class PgJobStore(PgChunks, PgDone):
    """Jobs in a Postgres schema. Create with `await PgJobStore.open(url)`."""

    def __init__(
        self,
        url: str,
        schema: str,
        pool: AsyncConnectionPool[Conn],
        wall: Callable[[], float],
        lease_clock: Callable[[], float] | None,
    ) -> None:
        self._url = url
        self.schema = schema
        self.where = f"{without_password(url)} (schema {schema})"
        self._pool = pool
        self._wall = wall
        self._lease_clock = lease_clock
        self._pks: dict[str, int] = {}
        self._locks = PgJobLocks(url, schema, self.where)
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        wall: Callable[[], float] = wall_time,
        lease_clock: Callable[[], float] | None = None,
        max_connections: int = 4,
    ) -> PgJobStore:
        """Connect, check and migrate. `lease_clock` None: leases run on the server's clock."""
        where = without_password(url)
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                schema = await prepare(conn, where)
            pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
                url, min_size=1, max_size=max_connections, open=False, kwargs={"autocommit": True}
            )
            await pool.open(wait=True, timeout=30.0)
        except psycopg.Error as exc:
            raise store_error(where, exc) from None
        return cls(url, schema, pool, wall, lease_clock)

    # -- plumbing ----------------------------------------------------------------------------------

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Conn]:
        if self._closed:
            raise StoreError(f"{self.where}: the job store is closed")
        try:
            async with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise store_error(self.where, exc) from None

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Conn]:
        async with self._conn() as conn, conn.transaction():
            yield conn

    async def _pk(self, conn: Conn, job_id: str) -> int:
        pk = await self._maybe_pk(conn, job_id)
        if pk is None:
            raise JobError(f"no job {job_id!r} in the job store {self.where}")
        return pk

    async def _maybe_pk(self, conn: Conn, job_id: str) -> int | None:
        pk = self._pks.get(job_id)
        if pk is None:
            row = await (await conn.execute(Q["job_pk"], {"job_id": job_id})).fetchone()
            if row is None:
                return None
            pk = self._pks[job_id] = int(row[0])
        return pk

    def _lease_now(self) -> float | None:
        return None if self._lease_clock is None else self._lease_clock()

    # -- jobs --------------------------------------------------------------------------------------

    async def create_job(self, job: JobRecord) -> None:
        check_status(job.status)
        params = {**_job_params(job), "options": job.options.to_json()}
        async with self._conn() as conn:
            if await (await conn.execute(Q["job_insert"], params)).fetchone() is None:
                raise JobError(f"job {job.job_id!r} already exists in {self.where}")

    async def get_job(self, job_id: str) -> JobRecord | None:
        async with self._conn() as conn:
            row = await (await conn.execute(Q["job_get"], {"job_id": job_id})).fetchone()
        return None if row is None else _job_record(row)

    async def list_jobs(self) -> list[JobRecord]:
        async with self._conn() as conn:
            rows = await (await conn.execute(Q["job_list"])).fetchall()
        return [_job_record(row) for row in rows]

    async def update_job(
        self,
        job_id: str,
        *,
        status: str | None = None,
        stop_reason: str | None = None,
        input_sha256: str | None = None,
        options: JobOptions | None = None,
        task_total: int | None = None,
    ) -> None:
        if status is not None:
            check_status(status)
        params = {
            "job_id": job_id,
            "status": status,
            "stop_reason": stop_reason,
            "input_sha256": input_sha256,
            "options": None if options is None else options.to_json(),
            "task_total": task_total,
            "updated_at": self._wall(),
        }
        async with self._conn() as conn:
            if (await conn.execute(Q["job_update"], params)).rowcount == 0:
                raise JobError(f"no job {job_id!r} in the job store {self.where}")

    # -- tasks -------------------------------------------------------------------------------------

    async def add_tasks(self, job_id: str, tasks: Iterable[TaskSpec]) -> int:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
        added = 0
        for chunk in _chunked(tasks, _ADD_CHUNK):
            params = {
                "job": pk,
                "seqs": [t.seq for t in chunk],
                "lines": [t.line_no for t in chunk],
                "ids": [t.custom_id for t in chunk],
                "bodies": [orjson.dumps(t.body) for t in chunk],
                "routes": [t.route for t in chunk],
                "steps": [t.step for t in chunk],
            }
            async with self._conn() as conn:
                added += (await conn.execute(Q["task_insert"], params)).rowcount
        return added

    async def claim_tasks(self, job_id: str, limit: int) -> list[TaskSpec]:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            if limit <= 0:
                return []
            params = {"job": pk, "limit": limit, "token": None}
            rows = await (await conn.execute(Q["task_claim"], params)).fetchall()
        return _specs(rows)

    async def claim_seqs(self, job_id: str, seqs: Sequence[int]) -> list[TaskSpec]:
        wanted = sorted({int(s) for s in seqs})
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            rows = await (await conn.execute(Q["task_claim_seqs"], {"job": pk, "seqs": wanted})).fetchall()
        return _specs(rows)

    async def complete_tasks(self, job_id: str, outcomes: Sequence[TaskOutcome]) -> None:
        for outcome in outcomes:
            check_outcome(outcome)
        async with self._tx() as conn:
            pk = await self._pk(conn, job_id)
            if not outcomes:
                return
            base = await self._take_orders(conn, pk, len(outcomes))
            params = complete_params(pk, outcomes, base, None)
            if (await conn.execute(Q["task_complete"], params)).rowcount < len(outcomes):  # final, or unknown
                seqs = sorted({o.seq for o in outcomes})
                row = await (await conn.execute(Q["task_seqs_present"], {"job": pk, "seqs": seqs})).fetchone()
                if row is None or int(row[0]) < len(seqs):
                    raise JobError(f"job {job_id!r}: an outcome names a task that does not exist")

    async def _take_orders(self, conn: Conn, pk: int, count: int) -> int:
        row = await (await conn.execute(Q["job_take_orders"], {"job": pk, "count": count})).fetchone()
        assert row is not None  # the job row exists: its pk was just read
        return int(row[0])

    async def requeue_running(self, job_id: str) -> int:
        return await self._requeue(job_id, TaskState.RUNNING)

    async def requeue_failed(self, job_id: str) -> int:
        return await self._requeue(job_id, TaskState.FAILED)

    async def _requeue(self, job_id: str, state: TaskState) -> int:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            return (await conn.execute(Q["task_requeue"], {"job": pk, "state": state.value})).rowcount

    async def counts(self, job_id: str) -> dict[TaskState, int]:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            rows = await (await conn.execute(Q["task_counts"], {"job": pk})).fetchall()
        result = dict.fromkeys(TaskState, 0)
        for state, n in rows:
            result[TaskState(state)] = int(n)
        return result

    async def totals(self, job_id: str) -> dict[str, float]:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            row = await (await conn.execute(Q["task_totals"], {"job": pk})).fetchone()
        prompt, completion, cost, attempts = row or (0, 0, 0, 0)
        return {
            "prompt_tokens": float(prompt),
            "completion_tokens": float(completion),
            "cost_usd": float(cost),
            "attempts": float(attempts),
        }

    async def iter_results(
        self,
        job_id: str,
        *,
        ordered: bool,
        states: Collection[TaskState] | None = None,
        with_bodies: bool = False,
    ) -> AsyncIterator[TaskRecord]:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
        wanted = sorted(TaskState(s).value for s in (TaskState if states is None else states))
        phases = ["results_by_seq"] if ordered else ["results_by_completion", "results_uncompleted_by_seq"]
        for name in phases:
            after = -1
            while True:
                params = {"job": pk, "after": after, "states": wanted, "with_bodies": with_bodies}
                records = await self._fetch_records(name, params)
                for record in records:
                    yield record
                if len(records) < _READ_CHUNK:
                    break
                last = records[-1]
                after = last.seq if name != "results_by_completion" else (last.completed_order or 0)

    async def _fetch_records(self, name: str, params: dict[str, object]) -> list[TaskRecord]:
        async with self._conn() as conn:
            rows = await (await conn.execute(Q[name], {**params, "limit": _READ_CHUNK})).fetchall()
        return [
            TaskRecord(r[0], r[1], r[2], TaskState(r[3]), r[4], None if r[5] is None else bytes(r[5]), r[6],
                       r[7], None if r[8] is None else orjson.loads(r[8]), r[9], r[10], float(r[11]))
            for r in rows
        ]  # fmt: skip

    async def get_task_body(self, job_id: str, seq: int) -> dict[str, Any] | None:
        async with self._conn() as conn:
            pk = await self._maybe_pk(conn, job_id)
            if pk is None:
                return None
            row = await (await conn.execute(Q["task_body"], {"job": pk, "seq": seq})).fetchone()
        return None if row is None else dict(orjson.loads(row[0]))

    # -- blobs and locks ---------------------------------------------------------------------------

    async def put_blob(self, job_id: str, key: str, value: bytes) -> None:
        async with self._conn() as conn:
            pk = await self._pk(conn, job_id)
            await conn.execute(Q["blob_put"], {"job": pk, "key": key, "value": bytes(value)})

    async def get_blob(self, job_id: str, key: str) -> bytes | None:
        async with self._conn() as conn:
            pk = await self._maybe_pk(conn, job_id)
            if pk is None:
                return None
            row = await (await conn.execute(Q["blob_get"], {"job": pk, "key": key})).fetchone()
        return None if row is None else bytes(row[0])

    def lock_job(self, job_id: str) -> AbstractContextManager[None]:
        return self._locks.hold(job_id)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._locks.close()
        await self._pool.close()

    def __repr__(self) -> str:
        return f"PgJobStore({self.where!r}, closed={self._closed}, locked={self._locks.held})"


def _chunked(tasks: Iterable[TaskSpec], size: int) -> Iterator[list[TaskSpec]]:
    chunk: list[TaskSpec] = []
    for spec in tasks:
        chunk.append(spec)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _specs(rows: list[tuple[Any, ...]]) -> list[TaskSpec]:
    rows.sort(key=lambda r: r[0])
    return [TaskSpec(r[0], r[1], r[2], orjson.loads(r[3]), r[4], r[5]) for r in rows]


def _job_params(job: JobRecord) -> dict[str, object]:
    return {
        "job_id": job.job_id,
        "input_path": job.input_path,
        "input_sha256": job.input_sha256,
        "output_path": job.output_path,
        "config_path": job.config_path,
        "status": job.status,
        "stop_reason": job.stop_reason,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "task_total": job.task_total,
    }


def _job_record(row: Any) -> JobRecord:
    return JobRecord(
        job_id=row[0],
        input_path=row[1],
        input_sha256=row[2],
        output_path=row[3],
        config_path=row[4],
        status=row[5],
        stop_reason=row[6],
        created_at=float(row[7]),
        updated_at=float(row[8]),
        task_total=int(row[9]),
        options=JobOptions.of_json(row[10]),
    )
