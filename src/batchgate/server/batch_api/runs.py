"""Runs: every batch and native job is one durable job (`jobs.runner.run_job`, the same engine
`batchgate run` uses) over a copy of its input file, run on the service's one shared gateway; the
record's status follows the job (validating → in_progress → finalizing → completed, or failed,
cancelling → cancelled), and a batch's output and error files are written from the job store at
the end.

A server that stops leaves its runs in progress: they resume, from the store, when it starts
again (`resume_all`). A cancel, or the end of a batch's window (a clock timer), stops the job
(its in-flight calls get the grace period) and keeps what finished. At most `max_jobs` jobs run
at once, at most `max_jobs_per_key` of one key's; later ones wait, `validating`, for a place (the
key running the fewest first, then a native job of higher priority).
What a kind of run adds — a native job's priority, options and callback, no window — comes as
`RunTerms` from the `terms` the runs are given; every run gets its weighted share of the gateway
(`priorities`) and is shown on `/metrics` (`watch`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path

from batchgate.clock import TimerHandle
from batchgate.errors import BatchgateError, InputError, ServiceRequestError
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import EngineOptions
from batchgate.jobs.job_setup import RunRequest
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.runner import run_job
from batchgate.jobs.store.protocol import TaskState
from batchgate.logs import INFO, event
from batchgate.server.batch_api.batch_files import write_batch_files
from batchgate.server.batch_api.input_problems import problems
from batchgate.server.batch_api.off_loop import OffLoop
from batchgate.server.batch_api.priorities import Places, PriorityShares
from batchgate.server.batch_api.run_cache import ServerCache
from batchgate.server.batch_api.run_parts import RunParts, RunTerms, Terms, batch_terms
from batchgate.server.batch_api.watch import RunWatch
from batchgate.server.tenancy.registry import BatchError, BatchRecord

log = logging.getLogger("batchgate.server")

ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


class Runs:
    """Every run of the server (one instance owns them all, their places and their resume at start)."""

    def __init__(self, parts: RunParts, terms: Terms = batch_terms) -> None:
        self.parts, self.terms = parts, terms
        self.shares = PriorityShares(parts.config.settings.concurrency)  # every run: batches are normal
        self.watch = RunWatch()  # what `/metrics` shows of the runs
        self.off_loop = OffLoop()  # a worker process for parsing a tenant's large input
        self._places = Places(parts.max_jobs, parts.places_per_key)
        self._timers: dict[str, TimerHandle] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._waiting: set[str] = set()  # runs waiting for a place (their job has not started)
        self._engines: dict[str, JobEngine] = {}
        self._closing = False
        self.cache = ServerCache(parts.config)  # the response cache: one store, each tenant's keys apart
        parts.folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    @property
    def closing(self) -> bool:
        return self._closing

    # -- what a run shows ------------------------------------------------------------------------
    def running(self, batch_id: str) -> Progress | None:
        """The running job's progress (from memory, not a store busy with its writes), if read."""
        engine = self._engines.get(batch_id)
        progress = engine.progress if engine is not None else None
        return progress if progress is not None and progress.before is not None else None

    def engine(self, batch_id: str) -> JobEngine | None:
        return self._engines.get(batch_id)

    def queued(self) -> list[str]:
        """The runs waiting for one of the `max_jobs` places."""
        return sorted(self._waiting)

    def busy(self, batch_id: str) -> bool:
        """Whether the run has work under way (waiting, running or finalizing)."""
        return batch_id in self._tasks

    def priority(self, batch_id: str) -> str:
        b = self.parts.registry.get_batch(batch_id)
        return self.terms(b).priority if b is not None else "normal"

    async def counts(self, b: BatchRecord) -> dict[str, int]:
        """`request_counts`: frozen at the end, the running job's while it runs here, else the store's."""
        if b.counts is not None:
            return b.counts
        if (p := self.running(b.id)) is not None and p.before is not None:
            succeeded, failed = p.before.succeeded + p.succeeded, p.before.failed + p.failed
            return {"total": p.total, "completed": succeeded, "failed": failed}
        store = self.parts.store
        job = await store.get_job(b.job_id)
        if job is None:
            return {"total": 0, "completed": 0, "failed": 0}
        counts = await store.counts(b.job_id)
        return {
            "total": job.task_total,
            "completed": counts[TaskState.SUCCEEDED],
            "failed": counts[TaskState.FAILED],
        }

    async def usage(self, b: BatchRecord) -> tuple[int, int]:
        """The prompt and completion tokens of the run's kept answers so far (frozen at the end)."""
        if b.usage is not None:
            return b.usage[0], b.usage[1]
        if (p := self.running(b.id)) is not None and p.before is not None:
            return p.before.prompt_tokens + p.prompt_tokens, p.before.completion_tokens + p.completion_tokens
        if await self.parts.store.get_job(b.job_id) is None:
            return 0, 0
        totals = await self.parts.store.totals(b.job_id)
        return int(totals.get("prompt_tokens", 0)), int(totals.get("completion_tokens", 0))

    # -- control ---------------------------------------------------------------------------------
    def start(self, b: BatchRecord) -> None:
        """Run the record's job (once a place is free), then finalize it."""
        self._spawn(b.id, self._run(b.id))

    def cancel(self, b: BatchRecord) -> BatchRecord:
        if b.status in ENDED or b.status == "finalizing":  # its results are being written
            raise ServiceRequestError(400, f"Cannot cancel a batch with status '{b.status}'.")
        if b.status == "cancelling":
            return b
        b.cancel_asked, b.status = True, "cancelling"
        b.times["cancelling_at"] = self.parts.now()
        self.parts.registry.save_batch(b)
        self._stop(b.id)
        return b

    def hold(self, batch_id: str) -> None:
        """A pause: stop the running job the way a signal does (in-flight calls get the grace
        period; its record, `paused`, keeps it from finalizing), or drop a run still waiting."""
        engine = self._engines.get(batch_id)
        task = self._tasks.get(batch_id)
        if engine is not None:
            engine.interrupt("paused")
        elif task is not None and batch_id in self._waiting:
            task.cancel()

    async def settled(self, batch_id: str) -> None:
        """Once the run's work under way (if any) has ended."""
        task = self._tasks.get(batch_id)
        if task is not None:
            await asyncio.wait({task})

    # -- lifecycle -------------------------------------------------------------------------------
    def resume_all(self) -> int:
        """Start again every run a stopped server left unfinished; how many."""
        unfinished = self.parts.registry.unfinished_batches()
        for b in unfinished:
            log.info("resuming %s (%s)", b.id, b.status)
            ends = b.status in ("finalizing", "cancelling") or b.stopping
            self._spawn(b.id, self._finalize(b.id) if ends else self._run(b.id))
            self.arm_expiry(b)
        return len(unfinished)

    def arm_expiry(self, b: BatchRecord) -> None:
        """A clock timer for the end of the batch's window (at once if it has passed)."""
        if not self.terms(b).expires:
            return
        clock = self.parts.clock
        left = b.created_at + self.parts.expire_after_s - clock.wall()
        self._timers[b.id] = clock.call_at(clock.now() + max(0.0, left), lambda: self._expire(b.id))

    def _expire(self, batch_id: str) -> None:
        self._timers.pop(batch_id, None)
        b = self.parts.registry.get_batch(batch_id)
        if b is None or b.status in ENDED or b.stopping or self._closing:
            return
        b.expired = True
        self.parts.registry.save_batch(b)
        log.info("batch %s expired: its window of %g s ended", batch_id, self.parts.expire_after_s)
        self._stop(batch_id)

    async def close(self) -> None:
        """Stop every running job (each gets the grace period); their runs resume next start."""
        self._closing = True
        self.off_loop.close()
        for timer in self._timers.values():
            timer.cancel()
        for engine in list(self._engines.values()):
            engine.interrupt("the server is stopping")
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.cache.close()

    def _spawn(self, batch_id: str, work: Coroutine[object, None, None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks[batch_id] = task
        task.add_done_callback(functools.partial(self._ended, batch_id))

    def _ended(self, batch_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(batch_id) is task:
            del self._tasks[batch_id]
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("batch %s: internal error: %s: %s", batch_id, type(exc).__name__, exc)

    # -- one run ---------------------------------------------------------------------------------
    async def _run(self, batch_id: str) -> None:
        """Run the job once one of the `max_jobs` places is free (until then it stays
        `validating`, and a cancel or expiry ends it at once: `_stop`), then finalize it."""
        b = self.parts.registry.get_batch(batch_id)
        owner = b.owner if b is not None else ""
        self._waiting.add(batch_id)
        try:
            await self._places.acquire(self.priority(batch_id), owner)
        finally:
            self._waiting.discard(batch_id)
        try:
            if not self._closing:
                await self._run_job(batch_id)
        finally:
            self._places.release(owner)
        await self._drop_copies(batch_id)

    def _stop(self, batch_id: str) -> None:
        """A cancel or an expiry: stop the run's job, or end a run still waiting for a place
        (nothing was sent) or one whose job has ended."""
        engine = self._engines.get(batch_id)
        if engine is not None:
            engine.request_cancel()  # stop, and cancel its provider batches; what finished is kept
            return
        task = self._tasks.get(batch_id)
        if task is not None and batch_id in self._waiting:
            task.cancel()
            task = None
        if task is None:
            self._spawn(batch_id, self._finalize(batch_id))

    async def _run_job(self, batch_id: str) -> None:
        try:
            if await self._job(batch_id):
                await self._after_job(batch_id)
        finally:
            self.shares.ended(batch_id)
            self.watch.ended(batch_id)

    async def _after_job(self, batch_id: str) -> None:
        b = self.parts.registry.get_batch(batch_id)
        if self._closing and b is not None and not b.stopping:
            return  # left in progress: it resumes when the server starts again
        if b is not None and b.status == "paused":
            return  # a paused native job: it runs again when resumed
        await self._finalize(batch_id)

    async def _job(self, batch_id: str) -> bool:
        """Run the job; False if it failed (the record says why) or never started."""
        b = self.parts.registry.get_batch(batch_id)
        terms = self.terms(b) if b is not None else RunTerms()
        req = replace(self._request(batch_id, terms), cache=await self.cache.for_batch(b))  # tenants apart
        say = functools.partial(log.info, "%s: %s", batch_id)
        try:
            await run_job(req, terms.config or self.parts.config, out=say, err=say)
        except InputError:
            self._fail(batch_id, problems(self.parts.config, req.input_path, req.batch_endpoint))
            return False
        except BatchgateError as exc:
            if not self._closing:
                self._fail(batch_id, [{"code": "batch_failed", "message": exc.message, "line": None}])
            return False
        except Exception as exc:  # a bug: the run fails with a generic message, the log says what
            log.error("batch %s: internal error: %s: %s", batch_id, type(exc).__name__, exc)
            self._fail(
                batch_id, [{"code": "internal_error", "message": "The server failed running this batch."}]
            )
            return False
        finally:
            self._engines.pop(batch_id, None)
        return True

    def _request(self, batch_id: str, terms: RunTerms) -> RunRequest:
        p = self.parts
        folder = p.folder / batch_id
        return RunRequest(
            input_path=folder / "input.jsonl",
            config_path=Path(p.config.source),
            output_path=folder / "output.jsonl",
            store_path=p.store_path,
            spec=terms.spec,
            ordered=True,
            quiet=True,
            engine=EngineOptions(grace_seconds=p.grace_s),
            gateway=p.gateway,
            on_engine=functools.partial(self._engine_started, batch_id),
            handle_signals=False,
            timeline_s=p.timeline_s,
            api_id=batch_id,  # `batchgate report/status/jobs/cancel` find the job by it
            batch_endpoint=terms.endpoint,  # a batch's lines must all name its endpoint
        )

    def _engine_started(self, batch_id: str, engine: JobEngine) -> None:
        """The job passed validation and its engine is about to run."""
        self._engines[batch_id] = engine
        registry = self.parts.registry
        b = registry.get_batch(batch_id)
        priority = self.terms(b).priority if b is not None else "normal"
        event(log, INFO, "batch_started", id=batch_id, priority=priority)
        if b is not None and (b.stopping or self._closing):
            engine.request_cancel() if b.stopping else engine.interrupt("the server is stopping")
        elif b is not None and b.status == "validating":
            b.status = "in_progress"
            b.times["in_progress_at"] = self.parts.now()
            registry.save_batch(b)
        self.shares.started(batch_id, engine, priority, b.owner if b is not None else "")
        self.watch.started(batch_id, priority, engine.progress)
        if b is not None and b.status == "paused":  # paused while it was being set up
            engine.interrupt("paused")

    def _fail(self, batch_id: str, errors: list[BatchError]) -> None:
        b = self.parts.registry.get_batch(batch_id)
        if b is None:
            return
        b.status, b.errors = "failed", errors
        b.times["failed_at"] = self.parts.now()
        b.counts = b.counts or {"total": 0, "completed": 0, "failed": 0}
        self._save_end(b)

    async def _finalize(self, batch_id: str) -> None:
        """Write the output and error files from the store, then the record's final status."""
        p = self.parts
        b = p.registry.get_batch(batch_id)
        if b is None:
            return
        if b.status != "cancelling":
            b.status = "finalizing"
            b.times["finalizing_at"] = p.now()
            p.registry.save_batch(b)
        job = await p.store.get_job(b.job_id)
        if job is not None and b.kind == "openai":  # Anthropic's results are read when asked for
            await write_batch_files(p.store, p.files, b)
        b.counts, b.usage = await self.counts(b), list(await self.usage(b))
        timer = self._timers.pop(b.id, None)
        if timer is not None:
            timer.cancel()
        if b.cancel_asked:
            b.status, at = "cancelled", "cancelled_at"
        elif b.expired:
            b.status, at = "expired", "expired_at"
        elif job is not None and job.status != "completed":
            b.status, at = "failed", "failed_at"
            b.errors = [{"code": "batch_stopped", "message": job.stop_reason or "stopped", "line": None}]
        else:
            b.status, at = "completed", "completed_at"
        b.times[at] = p.now()
        self._save_end(b)
        await self._drop_copies(batch_id)

    async def _drop_copies(self, batch_id: str) -> None:
        """An ended batch's folder (its input copy, the job's output) removed, in a thread: its
        results are read from the store and its files (issue 40: copies were never cleaned up).
        A native job's folder stays: `retry` runs its failed items again from it."""
        b = self.parts.registry.get_batch(batch_id)
        if b is not None and b.kind != "job" and b.status in ENDED:
            await asyncio.to_thread(shutil.rmtree, self.parts.folder / batch_id, ignore_errors=True)

    def _save_end(self, b: BatchRecord) -> None:
        """The run's end, with its callback event (to its terms' URL or its metadata's) in one transaction."""
        callbacks = self.parts.callbacks
        if callbacks is None:
            self.parts.registry.save_batch(b)
        else:
            callbacks.save_batch_end(b, self.terms(b).callback_url)
