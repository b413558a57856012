"""`SqliteJobStore`: the embedded default job store — one SQLite file in WAL mode.

Only named queries from `queries.sql` run here. One dedicated thread owns the connection, so the
event loop never blocks on disk; every write is one `BEGIN IMMEDIATE` transaction, so several
processes may share the file. Opening, checking and migrating the file, and turning SQLite errors
into `StoreError`s naming it, live in `sqlite_schema`. Per-job run locks are flocks on files next
to the database (`lockfile`); chunk leases in `sqlite_chunks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson

from batchgate.clock import wall_time
from batchgate.errors import JobError, StoreError
from batchgate.jobs.store.lockfile import JobLockFile, lock_path_for
from batchgate.jobs.store.options import JobOptions
from batchgate.jobs.store.protocol import (
    JobRecord,
    TaskOutcome,
    TaskRecord,
    TaskSpec,
    TaskState,
    check_outcome,
    check_status,
)
from batchgate.jobs.store.schema import connect, store_error
from batchgate.jobs.store.sqlfile import queries
from batchgate.jobs.store.sqlite_chunks import SqliteChunks
from batchgate.jobs.store.sqlite_done import SqliteDone

T = TypeVar("T")
# Tasks stored per transaction: SQLite holds a transaction's pages in memory, and the process's heap
# keeps what they took (storing 200,000 tasks left the process at 95 MB RSS with 10,000 a
# transaction, 50 MB with 1,000, in the same time: a commit in WAL mode, synchronous=NORMAL, is cheap).
_ADD_CHUNK = 1_000
_READ_CHUNK = 1_000
# job, seq, line_no, custom_id, body, route, step
_TaskRow = tuple[int, int, int, str, bytes, str | None, str | None]
Q = queries()


class SqliteJobStore(SqliteChunks, SqliteDone):
    """Jobs in one SQLite file. Create with `await SqliteJobStore.open(path)`."""

    def __init__(
        self, path: Path, conn: sqlite3.Connection, executor: ThreadPoolExecutor, wall: Callable[[], float]
    ) -> None:
        self.path = path
        self._conn = conn
        self._executor = executor
        self._wall = wall
        self._pks: dict[str, int] = {}
        self._locks: dict[str, JobLockFile] = {}
        self._closed = False

    @classmethod
    async def open(
        cls, path: str | Path, *, wall: Callable[[], float] = wall_time, busy_timeout: float = 5.0
    ) -> SqliteJobStore:
        """Open (creating with mode 0600 if missing) and migrate the job database at `path`."""
        path = Path(path)
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchgate-sqlite")
        try:
            conn = await asyncio.get_running_loop().run_in_executor(executor, connect, path, busy_timeout)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(path, conn, executor, wall)

    # -- plumbing (runs in the connection's thread) ----------------------------------------------

    async def _run(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise StoreError(f"{self.path}: the job store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._guarded, fn)

    def _guarded(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except sqlite3.Error as exc:
            raise store_error(self.path, exc) from None

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute(Q["begin_write"])
        try:
            yield self._conn
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._conn.rollback()
            raise
        self._conn.execute(Q["commit"])

    def _pk(self, job_id: str) -> int:
        pk = self._pks.get(job_id)
        if pk is None:
            row = self._conn.execute(Q["job_pk"], {"job_id": job_id}).fetchone()
            if row is None:
                raise JobError(f"no job {job_id!r} in the job store {self.path}")
            pk = self._pks[job_id] = int(row[0])
        return pk

    def _maybe_pk(self, job_id: str) -> int | None:
        try:
            return self._pk(job_id)
        except JobError:
            return None

    # -- jobs --------------------------------------------------------------------------------------

    async def create_job(self, job: JobRecord) -> None:
        check_status(job.status)
        params = _job_params(job)

        def insert() -> None:
            with self._tx() as conn:
                if conn.execute(Q["job_pk"], {"job_id": job.job_id}).fetchone():
                    raise JobError(f"job {job.job_id!r} already exists in {self.path}")
                conn.execute(Q["job_insert"], params)

        await self._run(insert)

    async def get_job(self, job_id: str) -> JobRecord | None:
        row = await self._run(lambda: self._conn.execute(Q["job_get"], {"job_id": job_id}).fetchone())
        return None if row is None else _job_record(row)

    async def list_jobs(self) -> list[JobRecord]:
        rows = await self._run(lambda: self._conn.execute(Q["job_list"]).fetchall())
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

        def update() -> None:
            with self._tx() as conn:
                if conn.execute(Q["job_update"], params).rowcount == 0:
                    raise JobError(f"no job {job_id!r} in the job store {self.path}")

        await self._run(update)

    # -- tasks -------------------------------------------------------------------------------------

    async def add_tasks(self, job_id: str, tasks: Iterable[TaskSpec]) -> int:
        pk = await self._run(functools.partial(self._pk, job_id))
        added = 0
        rows: list[_TaskRow] = []
        for spec in tasks:
            body = orjson.dumps(spec.body)
            rows.append((pk, spec.seq, spec.line_no, spec.custom_id, body, spec.route, spec.step))
            if len(rows) >= _ADD_CHUNK:
                added += await self._run(functools.partial(self._insert_tasks, rows))
                rows = []
        if rows:
            added += await self._run(functools.partial(self._insert_tasks, rows))
        return added

    def _insert_tasks(self, rows: list[_TaskRow]) -> int:
        with self._tx() as conn:
            before = conn.total_changes
            conn.executemany(Q["task_insert"], rows)
            return conn.total_changes - before

    async def claim_tasks(self, job_id: str, limit: int) -> list[TaskSpec]:
        def claim() -> list[TaskSpec]:
            pk = self._pk(job_id)
            if limit <= 0:
                return []
            with self._tx() as conn:
                rows = conn.execute(Q["task_claim"], {"job": pk, "limit": limit, "token": None}).fetchall()
            rows.sort(key=lambda r: r[0])
            return [TaskSpec(r[0], r[1], r[2], orjson.loads(r[3]), r[4], r[5]) for r in rows]

        return await self._run(claim)

    async def claim_seqs(self, job_id: str, seqs: Sequence[int]) -> list[TaskSpec]:
        wanted = orjson.dumps(sorted({int(s) for s in seqs}))

        def claim() -> list[TaskSpec]:
            pk = self._pk(job_id)
            with self._tx() as conn:
                rows = conn.execute(Q["task_claim_seqs"], {"job": pk, "seqs": wanted}).fetchall()
            rows.sort(key=lambda r: r[0])
            return [TaskSpec(r[0], r[1], r[2], orjson.loads(r[3]), r[4], r[5]) for r in rows]

        return await self._run(claim)

    async def complete_tasks(self, job_id: str, outcomes: Sequence[TaskOutcome]) -> None:
        for outcome in outcomes:
            check_outcome(outcome)
        if outcomes:
            await self._run(functools.partial(self._complete, job_id, list(outcomes)))
        else:
            await self._run(functools.partial(self._pk, job_id))

    def _complete(self, job_id: str, outcomes: list[TaskOutcome]) -> None:
        pk = self._pk(job_id)
        with self._tx() as conn:
            ((base,),) = conn.execute(Q["job_take_orders"], {"job": pk, "count": len(outcomes)}).fetchall()
            rows = [
                (o.state.value, o.attempts, o.output_line, o.error, o.provider, o.prompt_tokens,
                 o.completion_tokens, o.cost_usd, base + i, pk, o.seq)
                for i, o in enumerate(outcomes)
            ]  # fmt: skip
            before = conn.total_changes
            conn.executemany(Q["task_complete"], rows)
            if conn.total_changes - before < len(rows):  # some were final already, or unknown
                seqs = sorted({o.seq for o in outcomes})
                ((present,),) = conn.execute(
                    Q["task_seqs_present"], {"job": pk, "seqs": orjson.dumps(seqs)}
                ).fetchall()
                if present < len(seqs):
                    raise JobError(f"job {job_id!r}: an outcome names a task that does not exist")

    async def requeue_running(self, job_id: str) -> int:
        return await self._run(functools.partial(self._requeue, job_id, TaskState.RUNNING))

    async def requeue_failed(self, job_id: str) -> int:
        return await self._run(functools.partial(self._requeue, job_id, TaskState.FAILED))

    def _requeue(self, job_id: str, state: TaskState) -> int:
        pk = self._pk(job_id)
        with self._tx() as conn:
            return conn.execute(Q["task_requeue"], {"job": pk, "state": state.value}).rowcount

    async def counts(self, job_id: str) -> dict[TaskState, int]:
        def count() -> list[Any]:
            return self._conn.execute(Q["task_counts"], {"job": self._pk(job_id)}).fetchall()

        result = dict.fromkeys(TaskState, 0)
        for state, n in await self._run(count):
            result[TaskState(state)] = int(n)
        return result

    async def totals(self, job_id: str) -> dict[str, float]:
        def total() -> Any:
            return self._conn.execute(Q["task_totals"], {"job": self._pk(job_id)}).fetchone()

        prompt, completion, cost, attempts = await self._run(total)
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
        pk = await self._run(functools.partial(self._pk, job_id))
        wanted = orjson.dumps(sorted(TaskState(s).value for s in (TaskState if states is None else states)))
        phases = ["results_by_seq"] if ordered else ["results_by_completion", "results_uncompleted_by_seq"]
        for name in phases:
            after = -1
            while True:
                params = {"job": pk, "after": after, "states": wanted, "with_bodies": int(with_bodies)}
                rows = await self._run(functools.partial(self._fetch_records, name, params))
                for record in rows:
                    yield record
                if len(rows) < _READ_CHUNK:
                    break
                last = rows[-1]
                after = last.seq if name != "results_by_completion" else (last.completed_order or 0)

    def _fetch_records(self, name: str, params: dict[str, object]) -> list[TaskRecord]:
        rows = self._conn.execute(Q[name], {**params, "limit": _READ_CHUNK}).fetchall()
        return [
            TaskRecord(r[0], r[1], r[2], TaskState(r[3]), r[4], r[5], r[6], r[7],
                       None if r[8] is None else orjson.loads(r[8]), r[9], r[10], r[11])
            for r in rows
        ]  # fmt: skip

    async def get_task_body(self, job_id: str, seq: int) -> dict[str, Any] | None:
        def body() -> Any:
            pk = self._maybe_pk(job_id)
            return (
                None if pk is None else self._conn.execute(Q["task_body"], {"job": pk, "seq": seq}).fetchone()
            )

        row = await self._run(body)
        return None if row is None else dict(orjson.loads(row[0]))

    # -- blobs and locks ---------------------------------------------------------------------------

    async def put_blob(self, job_id: str, key: str, value: bytes) -> None:
        def put() -> None:
            pk = self._pk(job_id)
            with self._tx() as conn:
                conn.execute(Q["blob_put"], {"job": pk, "key": key, "value": bytes(value)})

        await self._run(put)

    async def get_blob(self, job_id: str, key: str) -> bytes | None:
        def get() -> Any:
            pk = self._maybe_pk(job_id)
            return (
                None if pk is None else self._conn.execute(Q["blob_get"], {"job": pk, "key": key}).fetchone()
            )

        row = await self._run(get)
        return None if row is None else bytes(row[0])

    def lock_job(self, job_id: str) -> AbstractContextManager[None]:
        return self._lock(job_id)

    @contextmanager
    def _lock(self, job_id: str) -> Iterator[None]:
        lock = JobLockFile(lock_path_for(self.path, job_id), job_id)
        lock.acquire()
        self._locks[job_id] = lock
        try:
            yield
        finally:
            lock.release()
            if self._locks.get(job_id) is lock:
                del self._locks[job_id]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for lock in list(self._locks.values()):
            lock.release()
        self._locks.clear()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(sqlite3.Error):
            await loop.run_in_executor(self._executor, self._conn.close)
        self._executor.shutdown(wait=True)

    def __repr__(self) -> str:
        return f"SqliteJobStore({str(self.path)!r}, closed={self._closed}, locked={sorted(self._locks)})"


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
        "options": job.options.to_json(),
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
