"""`batchgate worker`: one process among any number, on any machines, that takes chunks of the
submitted jobs' tasks from a shared store under a lease and runs them live through one `Gateway`.

A worker runs `lanes` chunk loops at once. Each claims up to `chunk_size` pending tasks of a
submitted job (`claim_chunk`, which first returns expired leases' tasks to the queue), renews the
lease every `lease_seconds / 3` from a clock timer, sends each task through the same `LiveTasks`
path `batchgate run` uses, and group-commits the outcomes with the lease's fencing token
(`commit_chunk`): once the lease is lost (expired, taken over) nothing more is written and the
chunk's unsent tasks are dropped. At the chunk's end, `release_chunk` returns what did not finish
to the queue. The first worker to find a job with no task pending or running (its next claim
finds none) writes its OUT, errors file and report (`finish_job`, under the job's lock, so only
one does; usually the one that committed the last task). Each worker keeps its figures of each
job (its own tallies, elapsed, retries) in the job's report segments (`figures.py`).

Chunks are taken from the job of the highest priority first (`run --submit-only --priority`),
then the oldest. Jobs are taken only when submitted for workers (`batchgate run --submit-only`,
which sets the `workers` option). With no claimable task the lane waits on the injected clock — a bounded
back-off (`idle_min_s` doubling to `idle_max_s`) between polls of the store, the one polling wait in
batchgate, since a remote store cannot wake it — or, with `exit_when_idle`, ends once no submitted
job has a pending or running task.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
from dataclasses import dataclass, field

from batchgate.clock import Clock, LoopClock
from batchgate.config import GatewayConfig
from batchgate.config.job_spec import PRIORITY_RANK
from batchgate.errors import (
    DispatchStopped,
    JobLockedError,
    LeaseLostError,
    NoTargetLeft,
    QuotaExhaustedError,
)
from batchgate.gateway import Gateway
from batchgate.jobs.budget_gate import BudgetGate
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.commit import GroupCommitter
from batchgate.jobs.finish import OutputFiles, finish_job
from batchgate.jobs.guards import BudgetGuard
from batchgate.jobs.lifecycle.callback import announce_end
from batchgate.jobs.live_task import Abandoned, LiveTasks
from batchgate.jobs.report.build import REPORT_BLOB
from batchgate.jobs.report.shapes import load_segments
from batchgate.jobs.store.protocol import Chunk, JobRecord, JobStore, TaskSpec, TaskState
from batchgate.jobs.workers.figures import WorkerFigures
from batchgate.jobs.workers.lease import LeaseKeeper
from batchgate.logs import INFO, event, get_logger
from batchgate.quota.store.location import StoreSpec
from batchgate.stats import GatewayStatistics

TAKEN_STATUSES = frozenset({"created", "running"})  # a submitted job in one of these is worked on
_log = get_logger("job")


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    chunk_size: int = 50
    lease_seconds: float = 30.0
    lanes: int = 4  # chunks in flight at once
    exit_when_idle: bool = False
    idle_min_s: float = 0.1
    idle_max_s: float = 2.0
    concurrency: int | None = None
    quota_store: StoreSpec | None = None  # where quotas are shared (None: the config's, else this process's)
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")


@dataclass(slots=True)
class WorkerTotals:
    chunks: int = 0
    committed: int = 0  # outcomes written under a held lease
    lost: int = 0  # chunks whose lease was lost (their writes refused)
    finished: list[str] = field(default_factory=list)  # jobs whose output this worker wrote


class Worker:
    def __init__(
        self, config: GatewayConfig, store: JobStore, options: WorkerOptions, clock: Clock | None = None
    ) -> None:
        self.config = config
        self.store = store
        self.options = options
        self.clock = clock or LoopClock()
        self.totals = WorkerTotals()
        self.figures = WorkerFigures(options.owner, self.clock)  # each job's own report figures
        self._stop = asyncio.Event()
        self._live: dict[str, LiveTasks] = {}  # per job: its own tallies, one gateway for all
        self._gateway: Gateway | None = None
        self._gates: tuple[BudgetGate, OutputCheck] | None = None
        self._started: set[str] = set()  # jobs this worker marked running

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Claim nothing more; tasks not yet sent give up, the rest finish and are committed."""
        self._stop.set()
        if self._gateway is not None:
            self._gateway.stop_sending()

    async def run(self) -> WorkerTotals:
        gateway = Gateway(
            self.config,
            clock=self.clock,
            concurrency=self.options.concurrency,
            quota_store=self.options.quota_store,
        )
        budget = BudgetGate(
            BudgetGuard(self.config.budget), lambda _reason: self.stop(), lambda: self.stopping
        )
        check = OutputCheck(
            self.config.job.validate_regex, self.config.job.validate_schema, source=self.config.source
        )
        async with gateway:
            self._gateway, self._gates = gateway, (budget, check)
            lanes = [asyncio.ensure_future(self._lane()) for _ in range(max(1, self.options.lanes))]
            try:
                await asyncio.gather(*lanes)
            finally:
                for lane in lanes:
                    lane.cancel()
                await asyncio.gather(*lanes, return_exceptions=True)
                self._gateway = None
        return self.totals

    # -- the chunk loop ------------------------------------------------------------------------
    async def _lane(self) -> None:
        idle = self.options.idle_min_s
        while not self.stopping:
            chunk = await self._claim()
            if chunk is not None:
                idle = self.options.idle_min_s
                await self._run_chunk(chunk)
                continue
            if self.options.exit_when_idle and not await self._any_open():
                return
            await self._idle(idle)
            idle = min(self.options.idle_max_s, idle * 2)

    async def _idle(self, seconds: float) -> None:
        """Wait `seconds` on the clock, or less if the worker is told to stop."""
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            stopper.cancel()

    async def _jobs(self) -> list[JobRecord]:
        """The submitted jobs in the order their chunks are taken: the highest priority first,
        then the oldest (the store lists them by creation)."""
        jobs = [j for j in await self.store.list_jobs() if j.options.workers]
        open_jobs = [j for j in jobs if j.status in TAKEN_STATUSES]
        return sorted(open_jobs, key=lambda j: PRIORITY_RANK.get(j.options.spec.priority, 1))

    async def _claim(self) -> Chunk | None:
        """A chunk of the first submitted job (by priority, then age) that has claimable tasks (None:
        none has). A job with
        none is checked for being done only then (not after every chunk: counting is a scan)."""
        opts = self.options
        for job in await self._jobs():
            chunk = await self.store.claim_chunk(
                job.job_id, opts.chunk_size, owner=opts.owner, lease_seconds=opts.lease_seconds
            )
            if chunk is not None:
                if job.job_id not in self._started and job.status == "created":
                    await self.store.update_job(job.job_id, status="running")
                self._started.add(job.job_id)
                return chunk
            await self._maybe_finish(job.job_id)  # nothing claimable: maybe nothing is left
        return None

    async def _any_open(self) -> bool:
        """Whether a submitted job still has a task pending or running (under anyone's lease)."""
        for job in await self._jobs():
            counts = await self.store.counts(job.job_id)
            if counts[TaskState.PENDING] or counts[TaskState.RUNNING]:
                return True
        return False

    async def _run_chunk(self, chunk: Chunk) -> None:
        """Run the chunk's tasks, committing each outcome fenced by the lease; then release it."""
        self.totals.chunks += 1
        write = functools.partial(self.store.commit_chunk, chunk.job_id, chunk.token)
        committer = GroupCommitter(self.store, chunk.job_id, self.clock, write=write)
        live = self._live_for(chunk.job_id)
        tasks = [asyncio.ensure_future(self._run_task(live, spec, committer)) for spec in chunk.tasks]
        lease = LeaseKeeper(
            self.store, chunk, self.options.lease_seconds, self.clock, lost=lambda: _cancel(tasks)
        )
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.figures.save(self.store, chunk.job_id, self._statistics())
            await committer.close()
            self.totals.committed += committer.committed
        except LeaseLostError:
            self.totals.lost += 1  # fenced out: nothing of it was written after the loss
        finally:
            lease.stop()
            await self.store.release_chunk(chunk.job_id, chunk.token)

    def _live_for(self, job_id: str) -> LiveTasks:
        live = self._live.get(job_id)
        if live is None:
            assert self._gateway is not None
            assert self._gates is not None
            budget, check = self._gates
            progress = self.figures.progress(job_id)
            live = LiveTasks(self.config, self._gateway, budget, check, progress, lambda: self.stopping)
            self._live[job_id] = live
        return live

    def _statistics(self) -> GatewayStatistics:
        assert self._gateway is not None
        return self._gateway.statistics()

    async def _run_task(self, live: LiveTasks, spec: TaskSpec, committer: GroupCommitter) -> None:
        try:
            result, attempts, invalid, billed = await live.run(spec)
        except Abandoned:
            return  # stopping: left for the release to put back
        if isinstance(result.error, DispatchStopped | QuotaExhaustedError):
            return  # never sent, or the account is out: back to the queue, not a failure
        if isinstance(result.error, NoTargetLeft):
            self.stop()  # this worker's key is refused (or its provider unreachable): it stops,
            return  # and leaves the task to the workers that can send it
        done = live.outcome(spec, result, attempts, invalid, billed)
        with contextlib.suppress(LeaseLostError):  # the chunk's end reports the loss
            committer.add(done)

    async def _maybe_finish(self, job_id: str) -> None:
        """When no task of the job is left, write its OUT, errors and report (one worker does)."""
        counts = await self.store.counts(job_id)
        if counts[TaskState.PENDING] or counts[TaskState.RUNNING]:
            return
        try:
            with self.store.lock_job(job_id):
                job = await self.store.get_job(job_id)
                if job is None or job.status not in TAKEN_STATUSES:
                    return  # another worker (or a `batchgate resume`) wrote it already
                stored = load_segments(await self.store.get_blob(job_id, REPORT_BLOB))
                segments = self.figures.merged(stored, job_id, self._statistics())
                await finish_job(self.store, job_id, OutputFiles.of_job(job), segments, stop_reason=None)
                self.totals.finished.append(job_id)
                self._live.pop(job_id, None)  # done: a long-lived worker keeps no figures of it
                self.figures.forget(job_id)
        except JobLockedError:
            return  # the worker holding the lock is finishing it
        spec = job.options.spec.over(self.config.job.spec)  # its callback, as `run` posts it
        await announce_end(spec, job_id, 0, self.clock, _say_callback, self.config.network)


def _say_callback(line: str) -> None:
    event(_log, INFO, "callback", text=line)


def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
