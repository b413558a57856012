"""`MemoryJobStore`: the `JobStore` semantics in plain Python, for unit tests and throwaway runs.

It keeps the same contract as the SQLite store (one conformance suite checks both), including
exclusive job locks, which here are held per store instance.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from batchgate.clock import wall_time
from batchgate.errors import JobError, JobLockedError, LeaseLostError
from batchgate.jobs.store.options import JobOptions
from batchgate.jobs.store.protocol import (
    TERMINAL_STATES,
    Chunk,
    JobRecord,
    TaskOutcome,
    TaskRecord,
    TaskSpec,
    TaskState,
    check_lease_seconds,
    check_outcome,
    check_status,
    lease_lost,
)

_CHUNK = 1000


@dataclass(slots=True)
class _Task:
    spec: TaskSpec
    state: TaskState = TaskState.PENDING
    outcome: TaskOutcome | None = None
    completed_order: int | None = None
    lease: int | None = None  # the token of the chunk lease it runs under, if any

    def record(self, with_body: bool) -> TaskRecord:
        out = self.outcome
        return TaskRecord(
            seq=self.spec.seq,
            line_no=self.spec.line_no,
            custom_id=self.spec.custom_id,
            state=self.state,
            attempts=out.attempts if out else 0,
            output_line=out.output_line if out else None,
            error=out.error if out else None,
            completed_order=self.completed_order,
            body=copy.deepcopy(self.spec.body) if with_body else None,
            route=self.spec.route,
            step=self.spec.step,
            cost_usd=out.cost_usd if out else 0.0,
        )


@dataclass(slots=True)
class _Job:
    record: JobRecord
    tasks: dict[int, _Task] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)  # heap of seqs; may hold stale entries
    next_order: int = 0
    blobs: dict[str, bytes] = field(default_factory=dict)
    leases: dict[int, float] = field(default_factory=dict)  # token -> expires_at


class MemoryJobStore:
    """Jobs in a dict; nothing survives the process."""

    def __init__(self, *, wall: Callable[[], float] = wall_time) -> None:
        self._wall = wall
        self._jobs: dict[str, _Job] = {}
        self._locked: set[str] = set()
        self._closed = False
        self._last_token = 0

    def _job(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise JobError(f"no job {job_id!r} in the job store")
        return job

    async def create_job(self, job: JobRecord) -> None:
        check_status(job.status)
        if job.job_id in self._jobs:
            raise JobError(f"job {job.job_id!r} already exists")
        self._jobs[job.job_id] = _Job(replace(job, options=copy.deepcopy(job.options)))

    async def get_job(self, job_id: str) -> JobRecord | None:
        job = self._jobs.get(job_id)
        return None if job is None else replace(job.record, options=copy.deepcopy(job.record.options))

    async def list_jobs(self) -> list[JobRecord]:
        records = [replace(j.record, options=copy.deepcopy(j.record.options)) for j in self._jobs.values()]
        return sorted(records, key=lambda r: (r.created_at, r.job_id))

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
        job = self._job(job_id)
        rec = job.record
        if status is not None:
            check_status(status)
            rec = replace(rec, status=status)
        if stop_reason is not None:
            rec = replace(rec, stop_reason=stop_reason or None)
        if input_sha256 is not None:
            rec = replace(rec, input_sha256=input_sha256)
        if options is not None:
            rec = replace(rec, options=copy.deepcopy(options))
        if task_total is not None:
            rec = replace(rec, task_total=task_total)
        job.record = replace(rec, updated_at=self._wall())

    async def add_tasks(self, job_id: str, tasks: Iterable[TaskSpec]) -> int:
        job = self._job(job_id)
        added = 0
        for spec in tasks:
            if spec.seq in job.tasks:
                continue
            job.tasks[spec.seq] = _Task(replace(spec, body=copy.deepcopy(spec.body)))
            heapq.heappush(job.pending, spec.seq)
            added += 1
        return added

    async def add_done(
        self, job_id: str, done: Sequence[tuple[TaskSpec, TaskOutcome]], pending: Sequence[TaskSpec] = ()
    ) -> int:
        job = self._job(job_id)
        for _, outcome in done:
            check_outcome(outcome)
        added = await self.add_tasks(job_id, pending)
        for spec, outcome in done:
            order, job.next_order = job.next_order, job.next_order + 1
            if spec.seq not in job.tasks:
                body = copy.deepcopy(spec.body)
                job.tasks[spec.seq] = _Task(replace(spec, body=body), outcome.state, outcome, order)
                added += 1
        return added

    async def claim_tasks(self, job_id: str, limit: int) -> list[TaskSpec]:
        job = self._job(job_id)
        claimed: list[TaskSpec] = []
        while job.pending and len(claimed) < limit:
            task = job.tasks[heapq.heappop(job.pending)]
            if task.state is TaskState.PENDING:  # skip stale heap entries
                task.state, task.lease = TaskState.RUNNING, None
                claimed.append(replace(task.spec, body=copy.deepcopy(task.spec.body)))
        return claimed

    async def claim_seqs(self, job_id: str, seqs: Sequence[int]) -> list[TaskSpec]:
        job = self._job(job_id)
        claimed: list[TaskSpec] = []
        for seq in sorted(set(seqs)):
            task = job.tasks.get(seq)
            if task is not None and task.state is TaskState.PENDING:  # its heap entry goes stale
                task.state, task.lease = TaskState.RUNNING, None
                claimed.append(replace(task.spec, body=copy.deepcopy(task.spec.body)))
        return claimed

    async def complete_tasks(self, job_id: str, outcomes: Sequence[TaskOutcome]) -> None:
        job = self._job(job_id)
        for outcome in outcomes:
            check_outcome(outcome)
            if outcome.seq not in job.tasks:
                raise JobError(f"job {job_id!r} has no task with seq {outcome.seq}")
        self._apply(job, outcomes)

    @staticmethod
    def _apply(job: _Job, outcomes: Sequence[TaskOutcome]) -> None:
        for outcome in outcomes:
            task = job.tasks[outcome.seq]
            order, job.next_order = job.next_order, job.next_order + 1
            if task.state is TaskState.SUCCEEDED:
                continue
            task.state = outcome.state
            task.outcome = outcome
            task.completed_order = order

    def _requeue(self, job: _Job, state: TaskState) -> int:
        moved = 0
        for task in job.tasks.values():
            if task.state is state:
                task.state = TaskState.PENDING
                task.outcome = None
                task.completed_order = None
                task.lease = None
                heapq.heappush(job.pending, task.spec.seq)
                moved += 1
        return moved

    async def requeue_running(self, job_id: str) -> int:
        return self._requeue(self._job(job_id), TaskState.RUNNING)

    async def requeue_failed(self, job_id: str) -> int:
        return self._requeue(self._job(job_id), TaskState.FAILED)

    async def counts(self, job_id: str) -> dict[TaskState, int]:
        result = dict.fromkeys(TaskState, 0)
        for task in self._job(job_id).tasks.values():
            result[task.state] += 1
        return result

    async def totals(self, job_id: str) -> dict[str, float]:
        sums = {"prompt_tokens": 0.0, "completion_tokens": 0.0, "cost_usd": 0.0, "attempts": 0.0}
        for task in self._job(job_id).tasks.values():
            out = task.outcome
            if out is not None and task.state in TERMINAL_STATES:
                sums["prompt_tokens"] += out.prompt_tokens
                sums["completion_tokens"] += out.completion_tokens
                sums["cost_usd"] += out.cost_usd
                sums["attempts"] += out.attempts
        return sums

    async def iter_results(
        self,
        job_id: str,
        *,
        ordered: bool,
        states: Collection[TaskState] | None = None,
        with_bodies: bool = False,
    ) -> AsyncIterator[TaskRecord]:
        job = self._job(job_id)
        wanted = frozenset(TaskState) if states is None else frozenset(states)
        for chunk in _chunks(self._keys(job, ordered, wanted)):
            for seq in chunk:
                task = job.tasks[seq]
                if task.state in wanted:
                    yield task.record(with_bodies)

    @staticmethod
    def _keys(job: _Job, ordered: bool, wanted: frozenset[TaskState]) -> list[int]:
        tasks = [t for t in job.tasks.values() if t.state in wanted]
        if ordered:
            return sorted(t.spec.seq for t in tasks)
        done = sorted((t.completed_order, t.spec.seq) for t in tasks if t.completed_order is not None)
        rest = sorted(t.spec.seq for t in tasks if t.completed_order is None)
        return [seq for _, seq in done] + rest

    # -- chunk leases (the store is one event loop's: each call is atomic) ----------------------------

    async def claim_chunk(self, job_id: str, limit: int, *, owner: str, lease_seconds: float) -> Chunk | None:
        check_lease_seconds(lease_seconds)
        job = self._job(job_id)
        self._reap(job)
        self._last_token += 1
        token, expires_at = self._last_token, self._wall() + lease_seconds
        tasks = await self.claim_tasks(job_id, limit)
        if not tasks:
            return None
        for spec in tasks:
            job.tasks[spec.seq].lease = token
        job.leases[token] = expires_at
        return Chunk(job_id, token, owner, expires_at, tuple(tasks))

    def _held(self, job: _Job, job_id: str, token: int) -> None:
        expires_at = job.leases.get(token)
        if expires_at is None or expires_at <= self._wall():
            raise LeaseLostError(lease_lost(job_id, token))

    async def renew_lease(self, job_id: str, token: int, lease_seconds: float) -> float:
        check_lease_seconds(lease_seconds)
        job = self._job(job_id)
        self._held(job, job_id, token)
        job.leases[token] = self._wall() + lease_seconds
        return job.leases[token]

    async def commit_chunk(self, job_id: str, token: int, outcomes: Sequence[TaskOutcome]) -> None:
        job = self._job(job_id)
        for outcome in outcomes:
            check_outcome(outcome)
        self._held(job, job_id, token)
        for outcome in outcomes:
            task = job.tasks.get(outcome.seq)
            if task is None or task.state is not TaskState.RUNNING or task.lease != token:
                raise LeaseLostError(lease_lost(job_id, token, outside=True))
        self._apply(job, outcomes)

    async def release_chunk(self, job_id: str, token: int) -> int:
        job = self._job(job_id)
        return self._return_leased(job, {token}) if job.leases.pop(token, None) is not None else 0

    async def requeue_expired(self, job_id: str) -> int:
        return self._reap(self._job(job_id))

    def _reap(self, job: _Job) -> int:
        now = self._wall()
        expired = {token for token, expires_at in job.leases.items() if expires_at <= now}
        for token in expired:
            del job.leases[token]
        return self._return_leased(job, expired) if expired else 0

    @staticmethod
    def _return_leased(job: _Job, tokens: set[int]) -> int:
        moved = 0
        for task in job.tasks.values():
            if task.state is TaskState.RUNNING and task.lease in tokens:
                task.state, task.lease = TaskState.PENDING, None
                heapq.heappush(job.pending, task.spec.seq)
                moved += 1
        return moved

    async def get_task_body(self, job_id: str, seq: int) -> dict[str, Any] | None:
        job = self._jobs.get(job_id)
        task = job.tasks.get(seq) if job else None
        return copy.deepcopy(task.spec.body) if task else None

    async def put_blob(self, job_id: str, key: str, value: bytes) -> None:
        self._job(job_id).blobs[key] = bytes(value)

    async def get_blob(self, job_id: str, key: str) -> bytes | None:
        job = self._jobs.get(job_id)
        return job.blobs.get(key) if job else None

    def lock_job(self, job_id: str) -> AbstractContextManager[None]:
        return self._lock(job_id)

    @contextmanager
    def _lock(self, job_id: str) -> Iterator[None]:
        if job_id in self._locked:
            raise JobLockedError(f"job {job_id!r} is locked by another batchgate run")
        self._locked.add(job_id)
        try:
            yield
        finally:
            self._locked.discard(job_id)

    async def close(self) -> None:
        self._locked.clear()
        self._closed = True

    def __repr__(self) -> str:
        return f"MemoryJobStore(jobs={len(self._jobs)}, locked={sorted(self._locked)})"


def _chunks(keys: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(keys), _CHUNK):
        yield keys[start : start + _CHUNK]
