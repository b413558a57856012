"""Batches as jobs: each batch is one durable job (`jobs.runner.run_job`, the same engine
`batchgate run` uses) over a copy of its input file, run on the service's one shared gateway; the
batch's status follows the job (validating → in_progress → finalizing → completed, or failed,
cancelling → cancelled), and its output and error files are written from the job store at the end.

A server that stops leaves its batches in progress: they resume, from the store, when it starts
again (`resume_all`). A cancel, or the end of the batch's window (a clock timer), stops the job
(its in-flight calls get the grace period) and keeps what finished. At most `max_jobs` jobs run
at once; later batches wait, `validating`, for a place (a native job of higher priority first).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchgate.clock import Clock, TimerHandle
from batchgate.config import GatewayConfig
from batchgate.errors import BatchgateError, InputError, ServiceRequestError
from batchgate.gateway import Gateway
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import EngineOptions
from batchgate.jobs.io.progress import Progress
from batchgate.jobs.io.timeline import DEFAULT_EVERY_S
from batchgate.jobs.runner import RunRequest, job_id_for, run_job
from batchgate.jobs.store.location import StoreLocation
from batchgate.jobs.store.protocol import JobStore, TaskState
from batchgate.logs import INFO, event
from batchgate.server.batch_api.batch_files import write_batch_files
from batchgate.server.batch_api.files import Files, link_or_copy, write_private
from batchgate.server.batch_api.input_problems import line_problems, problems
from batchgate.server.batch_api.priorities import Places
from batchgate.server.batch_api.shapes import (
    ENDPOINT,
    WINDOW,
    WINDOW_S,
    create_fields,
    new_id,
    not_found,
)
from batchgate.server.callbacks.delivery import Callbacks
from batchgate.server.tenancy.registry import BatchRecord, Registry

log = logging.getLogger("batchgate.server")

ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
MAX_JOBS = 64
PREFIXES = {"openai": "batch_", "anthropic": "msgbatch_"}


class Batches:
    def __init__(
        self,
        registry: Registry,
        files: Files,
        store: JobStore,
        *,
        config: GatewayConfig,
        store_path: StoreLocation,
        folder: Path,
        gateway: Gateway,
        clock: Clock,
        grace_s: float,
        expire_after_s: float = WINDOW_S,
        max_jobs: int = MAX_JOBS,
        callbacks: Callbacks | None = None,
    ) -> None:
        """`expire_after_s`: how long a batch may run before it expires (OpenAI's 24 h window);
        `max_jobs`: batches whose jobs run at once (the others wait their turn: the highest
        priority first, then first come first);
        `callbacks`: where a batch with `metadata.callback_url` records its end event."""
        self.registry, self.files, self.store = registry, files, store
        self.config, self.store_path, self.folder = config, store_path, folder
        self.gateway, self.clock, self.grace_s = gateway, clock, grace_s
        self.expire_after_s = expire_after_s
        self.callbacks = callbacks
        self._places = Places(max_jobs)
        self._timers: dict[str, TimerHandle] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._waiting: set[str] = set()  # batches waiting for a place (their job has not started)
        self._engines: dict[str, JobEngine] = {}
        self._closing = False
        self.timeline_s = DEFAULT_EVERY_S  # each run's timeline sampling (`serve --sample-every`)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _now(self) -> int:
        return int(self.clock.wall())

    def visible(self, batch_id: str, owner: str | None, kind: str = "openai") -> BatchRecord:
        """The batch of `kind`, if `owner` may see it (None: an admin key); a 404 otherwise."""
        b = self.registry.get_batch(batch_id)
        if b is None or b.kind != kind or (owner is not None and b.owner != owner):
            raise not_found("message batch" if kind == "anthropic" else "batch", batch_id)
        return b

    # -- requests --------------------------------------------------------------------------------
    def create(self, owner: str, viewer: str | None, body: dict[str, Any]) -> BatchRecord:
        """A new batch over the input file `body` names (which `viewer` must be able to see)."""
        file_id, metadata = create_fields(body)
        if self.callbacks is not None:
            self.callbacks.check_metadata(metadata, owner)
        source = self.files.visible(file_id, viewer)
        if source.purpose != "batch":
            raise ServiceRequestError(
                400, f"File '{file_id}' has purpose '{source.purpose}', not 'batch'.", param="input_file_id"
            )
        fill = functools.partial(link_or_copy, self.files.path(source.id))  # the file may be deleted
        return self._open(owner, "openai", fill, input_file_id=file_id, metadata=metadata)

    def create_inline(self, owner: str, kind: str, data: bytes) -> BatchRecord:
        """A new batch of inline requests (`data`: its input JSONL), refused with a 400 naming the
        first bad request before anything is created (Anthropic's API checks at once)."""
        record = self._open(owner, kind, functools.partial(write_private, data=data), check=True)
        record.requests = data.count(b"\n")
        self.registry.save_batch(record)
        return record

    def _open(
        self,
        owner: str,
        kind: str,
        fill: Callable[[Path], object],
        *,
        input_file_id: str = "",
        metadata: dict[str, str] | None = None,
        check: bool = False,
    ) -> BatchRecord:
        batch_id = new_id(PREFIXES[kind])
        folder = self.folder / batch_id
        folder.mkdir(mode=0o700)
        fill(folder / "input.jsonl")
        bad = line_problems(self.config, folder / "input.jsonl", chat_only=True) if check else []
        if bad:
            shutil.rmtree(folder, ignore_errors=True)
            first = bad[0]
            raise ServiceRequestError(400, f"requests[{first['line'] - 1}]: {first['message']}")
        record = BatchRecord(
            id=batch_id,
            owner=owner,
            input_file_id=input_file_id,
            endpoint=ENDPOINT,
            completion_window=WINDOW,
            created_at=self._now(),
            job_id=job_id_for(folder / "input.jsonl", folder / "output.jsonl"),
            metadata=metadata,
            kind=kind,
        )
        self.registry.add_batch(record)
        self._spawn(batch_id, self._run(batch_id))
        self._arm_expiry(record)
        return record

    def running(self, batch_id: str) -> Progress | None:
        """The running job's progress (from memory, not a store busy with its writes), if read."""
        engine = self._engines.get(batch_id)
        progress = engine.progress if engine is not None else None
        return progress if progress is not None and progress.before is not None else None

    async def counts(self, b: BatchRecord) -> dict[str, int]:
        """`request_counts`: frozen at the end, the running job's while it runs here, else the store's."""
        if b.counts is not None:
            return b.counts
        if (p := self.running(b.id)) is not None and p.before is not None:
            succeeded, failed = p.before.succeeded + p.succeeded, p.before.failed + p.failed
            return {"total": p.total, "completed": succeeded, "failed": failed}
        job = await self.store.get_job(b.job_id)
        if job is None:
            return {"total": 0, "completed": 0, "failed": 0}
        counts = await self.store.counts(b.job_id)
        return {
            "total": job.task_total,
            "completed": counts[TaskState.SUCCEEDED],
            "failed": counts[TaskState.FAILED],
        }

    async def usage(self, b: BatchRecord) -> tuple[int, int]:
        """The prompt and completion tokens of the batch's kept answers so far (frozen at the end)."""
        if b.usage is not None:
            return b.usage[0], b.usage[1]
        if (p := self.running(b.id)) is not None and p.before is not None:
            return p.before.prompt_tokens + p.prompt_tokens, p.before.completion_tokens + p.completion_tokens
        if await self.store.get_job(b.job_id) is None:
            return 0, 0
        totals = await self.store.totals(b.job_id)
        return int(totals.get("prompt_tokens", 0)), int(totals.get("completion_tokens", 0))

    def cancel(self, b: BatchRecord) -> BatchRecord:
        if b.status in ENDED or b.status == "finalizing":  # its results are being written
            raise ServiceRequestError(400, f"Cannot cancel a batch with status '{b.status}'.")
        if b.status == "cancelling":
            return b
        b.cancel_asked, b.status = True, "cancelling"
        b.times["cancelling_at"] = self._now()
        self.registry.save_batch(b)
        self._stop(b.id)
        return b

    # -- lifecycle -------------------------------------------------------------------------------
    def resume_all(self) -> int:
        """Start again every batch a stopped server left unfinished; how many."""
        unfinished = self.registry.unfinished_batches()
        for b in unfinished:
            log.info("resuming %s (%s)", b.id, b.status)
            ends = b.status in ("finalizing", "cancelling") or b.stopping
            self._spawn(b.id, self._finalize(b.id) if ends else self._run(b.id))
            self._arm_expiry(b)
        return len(unfinished)

    def _arm_expiry(self, b: BatchRecord) -> None:
        """A clock timer for the end of the batch's window (at once if it has passed)."""
        left = b.created_at + self.expire_after_s - self.clock.wall()
        self._timers[b.id] = self.clock.call_at(self.clock.now() + max(0.0, left), lambda: self._expire(b.id))

    def _expire(self, batch_id: str) -> None:
        self._timers.pop(batch_id, None)
        b = self.registry.get_batch(batch_id)
        if b is None or b.status in ENDED or b.stopping or self._closing:
            return
        b.expired = True
        self.registry.save_batch(b)
        log.info("batch %s expired: its window of %g s ended", batch_id, self.expire_after_s)
        self._stop(batch_id)

    async def close(self) -> None:
        """Stop every running job (each gets the grace period); their batches resume next start."""
        self._closing = True
        for timer in self._timers.values():
            timer.cancel()
        for engine in list(self._engines.values()):
            engine.interrupt("the server is stopping")
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, batch_id: str, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks[batch_id] = task
        task.add_done_callback(functools.partial(self._ended, batch_id))

    def _ended(self, batch_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(batch_id) is task:
            del self._tasks[batch_id]
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("batch %s: internal error: %s: %s", batch_id, type(exc).__name__, exc)

    # -- one batch -------------------------------------------------------------------------------
    async def _run(self, batch_id: str) -> None:
        """Run the batch's job once one of the `max_jobs` places is free (until then it stays
        `validating`, and a cancel or expiry ends it at once: `_stop_waiting`), then finalize it."""
        self._waiting.add(batch_id)
        try:
            await self._places.acquire(self.priority(batch_id))
        finally:
            self._waiting.discard(batch_id)
        try:
            if not self._closing:
                await self._run_job(batch_id)
        finally:
            self._places.release()

    def _stop(self, batch_id: str) -> None:
        """A cancel or an expiry: stop the batch's job, or end a batch still waiting for a place
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
        folder = self.folder / batch_id
        req = RunRequest(
            input_path=folder / "input.jsonl",
            config_path=Path(self.config.source),
            output_path=folder / "output.jsonl",
            store_path=self.store_path,
            ordered=True,
            quiet=True,
            engine=EngineOptions(grace_seconds=self.grace_s),
            gateway=self.gateway,
            on_engine=functools.partial(self._engine_started, batch_id),
            handle_signals=False,
            timeline_s=self.timeline_s,
            api_id=batch_id,  # `batchgate report/status/jobs/cancel` find the job by it
            chat_only=True,  # the batch's endpoint is /v1/chat/completions
        )
        req, config = self._run_setup(batch_id, req)
        say = functools.partial(log.info, "%s: %s", batch_id)
        try:
            await run_job(req, config, out=say, err=say)
        except InputError:
            self._fail(batch_id, problems(self.config, req.input_path))
            return
        except BatchgateError as exc:
            if not self._closing:
                self._fail(batch_id, [{"code": "batch_failed", "message": exc.message, "line": None}])
            return
        except Exception as exc:  # a bug: the batch fails with a generic message, the log says what
            log.error("batch %s: internal error: %s: %s", batch_id, type(exc).__name__, exc)
            self._fail(
                batch_id, [{"code": "internal_error", "message": "The server failed running this batch."}]
            )
            return
        finally:
            self._engines.pop(batch_id, None)
        b = self.registry.get_batch(batch_id)
        if self._closing and b is not None and not b.stopping:
            return  # left in progress: it resumes when the server starts again
        if b is not None and self._held(b):
            return  # paused (a native job): it runs again when resumed
        await self._finalize(batch_id)

    def priority(self, batch_id: str) -> str:
        return "normal"  # a native job has its own (`native.Jobs`)

    def _run_setup(self, batch_id: str, req: RunRequest) -> tuple[RunRequest, GatewayConfig]:
        return req, self.config  # a native job (`native.Jobs`) adds its own options

    def _held(self, b: BatchRecord) -> bool:
        return False  # a native job whose run returned paused stays as it is (`native.Jobs`)

    def _engine_started(self, batch_id: str, engine: JobEngine) -> None:
        """The job passed validation and its engine is about to run."""
        self._engines[batch_id] = engine
        event(log, INFO, "batch_started", id=batch_id, priority=self.priority(batch_id))
        b = self.registry.get_batch(batch_id)
        if b is None:
            return
        if b.stopping or self._closing:
            engine.request_cancel() if b.stopping else engine.interrupt("the server is stopping")
        elif b.status == "validating":
            b.status = "in_progress"
            b.times["in_progress_at"] = self._now()
            self.registry.save_batch(b)

    def _fail(self, batch_id: str, errors: list[dict[str, Any]]) -> None:
        b = self.registry.get_batch(batch_id)
        if b is None:
            return
        b.status, b.errors = "failed", errors
        b.times["failed_at"] = self._now()
        b.counts = b.counts or {"total": 0, "completed": 0, "failed": 0}
        self._save_end(b)

    async def _finalize(self, batch_id: str) -> None:
        """Write the output and error files from the store, then the batch's final status."""
        b = self.registry.get_batch(batch_id)
        if b is None:
            return
        if b.status != "cancelling":
            b.status = "finalizing"
            b.times["finalizing_at"] = self._now()
            self.registry.save_batch(b)
        job = await self.store.get_job(b.job_id)
        if job is not None and b.kind == "openai":  # Anthropic's results are read when asked for
            await write_batch_files(self.store, self.files, b)
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
        b.times[at] = self._now()
        self._save_end(b)

    def _save_end(self, b: BatchRecord, url: str | None = None) -> None:
        """The batch's end, with its callback event (to `url` or its metadata's) in one transaction."""
        if self.callbacks is None:
            self.registry.save_batch(b)
        else:
            self.callbacks.save_batch_end(b, url)
