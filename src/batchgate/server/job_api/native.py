"""Native jobs (`/v1/jobs`): batches of kind `job` run by the same machinery as the OpenAI and
Anthropic batches (`Batches`, which this extends), with their own options (`job_spec`, kept in
`job_table`) applied to each run: mode, deadline, budget and output check.

A job with `not_before` ahead waits `scheduled` on a clock timer (re-armed at start), sending
nothing. `pause` stops the job's engine the way a signal does (in-flight calls get the grace
period) and leaves it `paused`, across restarts too; `resume` starts it again. `retry` re-queues
a finished job's failed items (the store's `requeue_failed`) and runs it again. Native jobs have
no completion window: they never expire. Every run (batches too, at normal priority) gets its
weighted share of the gateway (`priorities`).
"""

from __future__ import annotations

import asyncio
import functools
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from batchgate.clock import TimerHandle
from batchgate.config import GatewayConfig
from batchgate.config.job_spec import JobSpec
from batchgate.errors import InputError, ServiceRequestError
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.job_setup import with_job_overrides
from batchgate.jobs.runner import RunRequest, job_id_for
from batchgate.server.batch_api.batches import Batches
from batchgate.server.batch_api.files import link_or_copy, write_private
from batchgate.server.batch_api.input_problems import line_problems
from batchgate.server.batch_api.priorities import PriorityShares
from batchgate.server.batch_api.shapes import ENDPOINT, new_id, not_found
from batchgate.server.door.job_fields import bad
from batchgate.server.job_api.job_spec import MAX_INLINE, parse_spec
from batchgate.server.job_api.job_table import KIND, JobTable, state
from batchgate.server.job_api.watch import RunWatch
from batchgate.server.tenancy.registry import BatchRecord

PAUSABLE = ("scheduled", "validating", "in_progress")
RETRYABLE = ("completed", "failed")
_ENDED_AT = ("completed_at", "failed_at", "cancelled_at", "finalizing_at", "in_progress_at")


class Jobs(Batches):
    """The service's batches and native jobs (one instance owns every run, its places and its
    resume at start)."""

    def __init__(self, *args: Any, table: JobTable, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.table = table
        self._starts: dict[str, TimerHandle] = {}
        self.shares = PriorityShares(self.config.settings.concurrency)  # every run: batches are normal
        self.watch = RunWatch()  # what `/metrics` shows of the runs

    def job(self, job_id: str, owner: str | None) -> tuple[BatchRecord, JobSpec]:
        """The native job and its spec, if `owner` may see it (None: an admin key); a 404 otherwise."""
        b = self.registry.get_batch(job_id)
        spec = self.table.get(job_id) if b is not None and b.kind == KIND else None
        if b is None or spec is None or (owner is not None and b.owner != owner):
            raise not_found("job", job_id)
        return b, spec

    # -- create ----------------------------------------------------------------------------------
    async def create_job(
        self, owner: str, viewer: str | None, body: dict[str, Any]
    ) -> tuple[BatchRecord, JobSpec]:
        """A new job, its input copied and checked off the event loop (a file may be 200 MB)."""
        now = self.clock.wall()
        spec = await asyncio.to_thread(parse_spec, body, now)  # its output check compiled, off the loop
        if spec.callback_url is not None and self.callbacks is not None:
            self.callbacks.check_url(spec.callback_url, owner, param="callback_url")
        fill, file_id, inline = self._input(body, viewer)
        job_id = new_id("job_")
        folder = self.folder / job_id
        folder.mkdir(mode=0o700)
        path = folder / "input.jsonl"
        try:
            await asyncio.to_thread(fill, path)
            await asyncio.to_thread(self._check_lines, path, inline)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # refused: nothing of it is kept
            raise
        record = BatchRecord(
            id=job_id,
            owner=owner,
            input_file_id=file_id,
            endpoint=ENDPOINT,
            completion_window="none",
            created_at=int(now),
            job_id=job_id_for(path, folder / "output.jsonl"),
            metadata=dict(spec.metadata) or None,
            kind=KIND,
            requests=len(body["requests"]) if inline else 0,
            status="scheduled" if spec.not_before is not None and spec.not_before > now else "validating",
        )
        self.table.add(job_id, spec)
        self.registry.add_batch(record)
        self._start(record, spec)
        return record, spec

    def _input(self, body: dict[str, Any], viewer: str | None) -> tuple[Callable[[Path], object], str, bool]:
        """How to fill the job's input file, the uploaded file's id ("" inline), inline or not."""
        file_id, requests = body.get("input_file_id"), body.get("requests")
        if (file_id is None) == (requests is None):
            raise bad("input_file_id", "give exactly one of 'input_file_id' and 'requests'")
        if file_id is not None:
            if not isinstance(file_id, str) or not file_id:
                raise bad("input_file_id", "expected a file id")
            source = self.files.visible(file_id, viewer)
            if source.purpose != "batch":
                raise bad("input_file_id", f"file has purpose '{source.purpose}', not 'batch'", 422)
            return functools.partial(link_or_copy, self.files.path(source.id)), file_id, False
        if not isinstance(requests, list) or not 0 < len(requests) <= MAX_INLINE:
            raise bad("requests", f"expected a list of 1 to {MAX_INLINE} request objects")
        for i, item in enumerate(requests):
            if not isinstance(item, dict):
                raise bad(f"requests[{i}]", "expected a request object")
        data = b"".join(orjson.dumps(item) + b"\n" for item in requests)
        return functools.partial(write_private, data=data), "", True

    def _check_lines(self, path: Path, inline: bool) -> None:
        """Refuse the job (422, naming the first bad request) before anything is created."""
        try:
            problems = line_problems(self.config, path)
        except InputError as exc:
            problems = [{"line": None, "message": exc.message}]
        if not problems:
            return
        first = problems[0]
        if first["line"] is None:
            raise bad("requests" if inline else "input_file_id", first["message"], 422)
        where = f"requests[{first['line'] - 1}]" if inline else "input_file_id"
        line = "" if inline else f"line {first['line']}: "
        raise bad(where, f"{line}{first['message']}", 422)

    # -- scheduling ------------------------------------------------------------------------------
    def _start(self, b: BatchRecord, spec: JobSpec) -> None:
        """Run the job now, or arm a clock timer for its `not_before`."""
        if b.status != "scheduled":
            self._spawn(b.id, self._run(b.id))
            return
        left = (spec.not_before or 0.0) - self.clock.wall()
        due = functools.partial(self._due, b.id)
        self._starts[b.id] = self.clock.call_at(self.clock.now() + max(0.0, left), due)

    def _due(self, job_id: str) -> None:
        self._starts.pop(job_id, None)
        b = self.registry.get_batch(job_id)
        if b is None or b.status != "scheduled" or self._closing:
            return
        b.status = "validating"
        self.registry.save_batch(b)
        self._spawn(job_id, self._run(job_id))

    def resume_all(self) -> int:
        """Batches and running jobs resume (`Batches.resume_all`); scheduled jobs re-arm their timer;
        paused ones stay paused."""
        started = super().resume_all()
        for b in self.table.with_status("scheduled"):
            self._start(b, self.table.get(b.id) or JobSpec())
        return started

    def _arm_expiry(self, b: BatchRecord) -> None:
        if b.kind != KIND:  # a native job has no completion window
            super()._arm_expiry(b)

    async def close(self) -> None:
        for timer in self._starts.values():
            timer.cancel()
        await super().close()

    # -- control ---------------------------------------------------------------------------------
    def pause(self, b: BatchRecord) -> BatchRecord:
        if b.status == "paused":
            return b
        if b.status not in PAUSABLE:
            raise conflict(b, "pause")
        b.status = "paused"
        b.times["paused_at"] = self._now()
        self.registry.save_batch(b)
        timer = self._starts.pop(b.id, None)
        if timer is not None:
            timer.cancel()
        engine = self._engines.get(b.id)
        task = self._tasks.get(b.id)
        if engine is not None:
            engine.interrupt("paused")  # it returns after the grace period; `_held` keeps it paused
        elif task is not None and b.id in self._waiting:
            task.cancel()
        return b

    async def resume(self, b: BatchRecord, spec: JobSpec) -> BatchRecord:
        if b.status != "paused":
            raise conflict(b, "resume")
        task = self._tasks.get(b.id)
        if task is not None:  # the pause is still stopping the engine
            await asyncio.wait({task})
        now = self.registry.get_batch(b.id)
        if now is None or now.status != "paused":
            raise conflict(now or b, "resume")
        ahead = spec.not_before is not None and spec.not_before > self.clock.wall()
        now.status = "scheduled" if ahead else "validating"
        self.registry.save_batch(now)
        self._start(now, spec)
        return now

    async def retry(self, b: BatchRecord) -> tuple[BatchRecord, int]:
        """Re-queue the failed items of a finished job and run it again; how many."""
        if b.status not in RETRYABLE or b.id in self._tasks:
            raise conflict(b, "retry")
        if await self.store.get_job(b.job_id) is None:
            raise ServiceRequestError(
                409, f"Job '{b.id}' never ran; there is nothing to retry.", code="conflict"
            )
        requeued = await self.store.requeue_failed(b.job_id)
        if requeued == 0:
            raise ServiceRequestError(409, f"Job '{b.id}' has no failed items.", code="conflict")
        b.status, b.counts, b.usage, b.errors = "validating", None, None, None
        for key in _ENDED_AT:
            b.times.pop(key, None)
        self.registry.save_batch(b)
        self._spawn(b.id, self._run(b.id))
        return b, requeued

    def engine(self, job_id: str) -> JobEngine | None:
        return self._engines.get(job_id)

    def queued(self) -> list[str]:
        """The runs waiting for one of the `max_jobs` places."""
        return sorted(self._waiting)

    def priority(self, batch_id: str) -> str:
        spec = self.table.get(batch_id)
        return spec.priority if spec is not None else "normal"

    # -- the run's options -----------------------------------------------------------------------
    def _run_setup(self, batch_id: str, req: RunRequest) -> tuple[RunRequest, GatewayConfig]:
        b = self.registry.get_batch(batch_id)
        spec = self.table.get(batch_id) if b is not None and b.kind == KIND else None
        if b is None or spec is None:
            return super()._run_setup(batch_id, req)
        # the job remembers its spec; its budget and output check are the config's from the start
        return replace(req, spec=spec), with_job_overrides(self.config, spec)

    def _save_end(self, b: BatchRecord, url: str | None = None) -> None:
        spec = self.table.get(b.id) if b.kind == KIND else None
        super()._save_end(b, url or (spec.callback_url if spec is not None else None))

    def _held(self, b: BatchRecord) -> bool:
        return b.kind == KIND and b.status == "paused"

    def _engine_started(self, batch_id: str, engine: JobEngine) -> None:
        super()._engine_started(batch_id, engine)
        b = self.registry.get_batch(batch_id)
        spec = self.table.get(batch_id) if b is not None and b.kind == KIND else None
        priority = spec.priority if spec is not None else "normal"
        self.shares.started(batch_id, engine, priority)
        self.watch.started(batch_id, priority, engine.progress)
        if b is not None and b.status == "paused":  # paused while it was being set up
            engine.interrupt("paused")

    async def _run_job(self, batch_id: str) -> None:
        try:
            await super()._run_job(batch_id)
        finally:
            self.shares.ended(batch_id)
            self.watch.ended(batch_id)


def conflict(b: BatchRecord, action: str) -> ServiceRequestError:
    return ServiceRequestError(
        409, f"Cannot {action} job '{b.id}' in state '{state(b)}'.", param="id", code="conflict"
    )
