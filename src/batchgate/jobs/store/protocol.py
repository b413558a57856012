"""The job store seam: records that cross it and the `JobStore` protocol every backend implements.

The engine talks to a store only through `JobStore`; SQL (or any other storage detail) stays behind
it. Task claims are explicit (`claim_tasks` moves pending -> running) so several cooperating workers
can share one store later. Every implementation must pass `tests/jobs/test_store_conformance.py`.

Semantics every store honours (the conformance suite checks each):
- Job-scoped calls on an unknown job raise `JobError`, except `get_job`, `get_task_body` and
  `get_blob`, which return None.
- `add_tasks` is idempotent on (job_id, seq): a task already present is left untouched; it may be
  called while the job runs (a pipeline adds a step's task once its inputs are ready).
- A task's `route` and `step` (None for a plain task) are stored as given and come back unchanged
  from `claim_tasks`, `claim_seqs` and `iter_results`.
- `claim_tasks` hands out pending tasks in `seq` order, each to one caller only; `claim_seqs` claims
  exactly the named tasks that are pending (others are ignored), e.g. those of a persisted batch.
- `complete_tasks` writes all outcomes in one transaction and gives each a job-wide, increasing
  `completed_order`; a task that already SUCCEEDED is final and never overwritten.
- `add_done` stores tasks that are already finished (an answer from the response cache), each
  with its outcome, and the chunk's other tasks (`pending`) in one transaction — a chunk goes in
  whole or not at all, so the tasks a job holds stay a prefix of its input: like `add_tasks`, a
  task already present is left untouched; the finished ones get `completed_order`s in list order.
- `requeue_running` puts running tasks back to pending (at-least-once after a crash or a stop).
- Chunks (for workers sharing one store): `claim_chunk` first returns the tasks of the job's
  expired leases to pending, then claims pending tasks in `seq` order under a new lease whose
  `token` (the fencing token) is larger than every token granted before. `renew_lease` and
  `commit_chunk` refuse, with `LeaseLostError` and without writing, a lease that expired, was
  released or was reaped; `commit_chunk` writes only tasks still running under that token. Lease
  time comes from the store's clock (on Postgres the server's, shared by every worker).
- `iter_results(ordered=True)` yields by `seq`; `ordered=False` yields completed tasks by
  `completed_order`, then any not yet completed by `seq`. Both stream in bounded chunks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from batchgate.jobs.store.options import JobOptions  # the config's job spec: loaded by the stores

DEFAULT_STORE = Path(".batchgate") / "jobs.db"  # the job database `batchgate run` uses by default


class TaskState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


TERMINAL_STATES: frozenset[TaskState] = frozenset({TaskState.SUCCEEDED, TaskState.FAILED})
JOB_STATUSES: frozenset[str] = frozenset({"created", "running", "stopped", "completed", "failed"})
TOTAL_KEYS: tuple[str, ...] = ("prompt_tokens", "completion_tokens", "cost_usd", "attempts")


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One request to run: where it came from and its normalised OpenAI chat body."""

    seq: int  # 0-based order among the accepted input lines
    line_no: int  # 1-based line in the input file
    custom_id: str
    body: dict[str, Any]  # normalised OpenAI chat body; has "model"
    route: str | None = None  # fan-out / pipeline: the route this task runs on (None: plain task)
    step: str | None = None  # fan-out / pipeline: the step this task belongs to (None: plain task)


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """How a task ended, as the engine reports it to the store."""

    seq: int
    state: TaskState  # SUCCEEDED or FAILED
    attempts: int
    output_line: bytes  # the complete OUT JSON line, no newline
    error: str | None  # one line, no secrets
    provider: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A task as stored; `body` is filled only when asked for (`iter_results(with_bodies=True)`)."""

    seq: int
    line_no: int
    custom_id: str
    state: TaskState
    attempts: int
    output_line: bytes | None
    error: str | None
    completed_order: int | None  # job-wide completion sequence, None until completed
    body: dict[str, Any] | None = None
    route: str | None = None
    step: str | None = None
    cost_usd: float = 0.0  # what the task was billed (0 until completed)


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    input_path: str
    input_sha256: str
    output_path: str
    config_path: str
    status: str  # "created" | "running" | "stopped" | "completed" | "failed"
    stop_reason: str | None
    created_at: float  # wall seconds
    updated_at: float  # wall seconds
    task_total: int
    options: JobOptions


@dataclass(frozen=True, slots=True)
class Chunk:
    """Tasks of one job claimed under one lease; `token` fences every write made under it."""

    job_id: str
    token: int
    owner: str
    expires_at: float  # seconds on the store's lease clock
    tasks: tuple[TaskSpec, ...]


@runtime_checkable
class JobStore(Protocol):
    """Durable jobs and their tasks. All methods are safe to call from the event loop."""

    async def create_job(self, job: JobRecord) -> None:
        """Store a new job; `JobError` if one with the same id exists."""
        ...

    async def get_job(self, job_id: str) -> JobRecord | None: ...

    async def list_jobs(self) -> list[JobRecord]:
        """Every job, oldest first."""
        ...

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
        """Change the given fields (None leaves a field alone; `stop_reason=""` clears the
        reason) and bump `updated_at`."""
        ...

    async def add_tasks(self, job_id: str, tasks: Iterable[TaskSpec]) -> int:
        """Insert tasks in chunked transactions; returns how many were new."""
        ...

    async def claim_tasks(self, job_id: str, limit: int) -> list[TaskSpec]:
        """Move up to `limit` pending tasks to running, lowest `seq` first, and return them."""
        ...

    async def claim_seqs(self, job_id: str, seqs: Sequence[int]) -> list[TaskSpec]:
        """Move exactly the named tasks that are pending to running and return them by `seq`;
        seqs that are not pending (or do not exist) are ignored."""
        ...

    async def complete_tasks(self, job_id: str, outcomes: Sequence[TaskOutcome]) -> None:
        """Record outcomes in one transaction, assigning `completed_order` in list order."""
        ...

    async def add_done(
        self, job_id: str, done: Sequence[tuple[TaskSpec, TaskOutcome]], pending: Sequence[TaskSpec] = ()
    ) -> int:
        """Insert finished tasks with their outcomes, and `pending` tasks, in one transaction;
        returns how many were new."""
        ...

    async def requeue_running(self, job_id: str) -> int:
        """Running -> pending; returns how many moved."""
        ...

    async def requeue_failed(self, job_id: str) -> int:
        """Failed -> pending (to retry failures); clears their result. Returns how many moved."""
        ...

    async def counts(self, job_id: str) -> dict[TaskState, int]:
        """Tasks per state; every state is present (zero when none)."""
        ...

    async def totals(self, job_id: str) -> dict[str, float]:
        """Sums of prompt_tokens, completion_tokens, cost_usd and attempts over completed tasks."""
        ...

    def iter_results(
        self,
        job_id: str,
        *,
        ordered: bool,
        states: Collection[TaskState] | None = None,
        with_bodies: bool = False,
    ) -> AsyncIterator[TaskRecord]:
        """Stream tasks (all states unless `states` is given); see the module docstring for order."""
        ...

    async def get_task_body(self, job_id: str, seq: int) -> dict[str, Any] | None: ...

    async def claim_chunk(self, job_id: str, limit: int, *, owner: str, lease_seconds: float) -> Chunk | None:
        """Reap expired leases, then claim up to `limit` pending tasks under a new lease (None: none)."""
        ...

    async def renew_lease(self, job_id: str, token: int, lease_seconds: float) -> float:
        """Extend a held lease to now + `lease_seconds`; returns the new expiry, or `LeaseLostError`."""
        ...

    async def commit_chunk(self, job_id: str, token: int, outcomes: Sequence[TaskOutcome]) -> None:
        """`complete_tasks` fenced by `token`: all outcomes or none (`LeaseLostError`)."""
        ...

    async def release_chunk(self, job_id: str, token: int) -> int:
        """Drop the lease; its unfinished tasks go back to pending. Returns how many (0 if lost)."""
        ...

    async def requeue_expired(self, job_id: str) -> int:
        """Tasks under expired leases go back to pending; returns how many moved."""
        ...

    async def put_blob(self, job_id: str, key: str, value: bytes) -> None: ...

    async def get_blob(self, job_id: str, key: str) -> bytes | None: ...

    def lock_job(self, job_id: str) -> AbstractContextManager[None]:
        """Hold the job exclusively; `JobLockedError` naming the job if another run holds it."""
        ...

    async def close(self) -> None:
        """Release held locks and resources; idempotent."""
        ...


def check_outcome(outcome: TaskOutcome) -> None:
    """Refuse an outcome that is not terminal (a programming error, not bad input)."""
    if outcome.state not in TERMINAL_STATES:
        raise ValueError(f"outcome for seq {outcome.seq} has non-terminal state {outcome.state}")


def lease_lost(job_id: str, token: int, outside: bool = False) -> str:
    """The `LeaseLostError` message: the lease is gone, or an outcome names a task it does not hold."""
    if outside:
        return f"job {job_id!r}: an outcome names a task not running under lease {token}; nothing written"
    return f"job {job_id!r}: lease {token} expired or was taken over; nothing written"


def check_lease_seconds(lease_seconds: float) -> None:
    if not lease_seconds > 0:
        raise ValueError(f"lease_seconds must be positive, got {lease_seconds}")


def check_status(status: str) -> None:
    if status not in JOB_STATUSES:
        raise ValueError(f"unknown job status {status!r}")
