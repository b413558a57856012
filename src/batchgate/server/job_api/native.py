"""Native jobs (`/v1/jobs`): records of kind `job` run by the same `Runs` as the OpenAI and
Anthropic batches, with their own options (`job_spec`, kept in `job_table`) applied to each run
(`JobTerms`): priority, mode, deadline, budget, output check and callback URL.

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
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson

from batchgate.clock import TimerHandle
from batchgate.config import GatewayConfig
from batchgate.config.job_spec import JobSpec
from batchgate.errors import InputError, ServiceRequestError
from batchgate.jobs.batch.policy import with_job_overrides
from batchgate.jobs.job_setup import job_id_for
from batchgate.server.batch_api.files import link_or_copy, write_private
from batchgate.server.batch_api.input_problems import line_problems
from batchgate.server.batch_api.run_parts import RunTerms, batch_terms
from batchgate.server.batch_api.runs import Runs
from batchgate.server.batch_api.shapes import ENDPOINT, new_id, not_found
from batchgate.server.door.job_fields import bad
from batchgate.server.job_api.job_spec import MAX_INLINE, parse_spec
from batchgate.server.job_api.job_table import KIND, JobTable, state
from batchgate.server.tenancy.registry import BatchRecord

PAUSABLE = ("scheduled", "validating", "in_progress")
RETRYABLE = ("completed", "failed")
_ENDED_AT = ("completed_at", "failed_at", "cancelled_at", "finalizing_at", "in_progress_at")


class JobTerms:
    """What a native job's spec makes of its runs (`Runs.terms`); a batch's are the defaults."""

    def __init__(self, table: JobTable, config: GatewayConfig) -> None:
        self.table, self.config = table, config

    def __call__(self, b: BatchRecord) -> RunTerms:
        if b.kind != KIND:
            return batch_terms(b)
        spec = self.table.get(b.id)
        if spec is None:
            return RunTerms(expires=False)
        return RunTerms(
            priority=spec.priority,
            expires=False,
            callback_url=spec.callback_url,
            config=with_job_overrides(self.config, spec),  # its budget and output check from the start
            spec=spec,  # the job in the store remembers it
        )


class Jobs:
    """The server's native jobs: created, scheduled, paused, resumed and retried; run by `runs`."""

    def __init__(self, runs: Runs, table: JobTable) -> None:
        self.runs, self.table = runs, table
        self.parts = runs.parts
        self._starts: dict[str, TimerHandle] = {}

    def job(self, job_id: str, owner: str | None) -> tuple[BatchRecord, JobSpec]:
        """The native job and its spec, if `owner` may see it (None: an admin key); a 404 otherwise."""
        b = self.parts.registry.get_batch(job_id)
        spec = self.table.get(job_id) if b is not None and b.kind == KIND else None
        if b is None or spec is None or (owner is not None and b.owner != owner):
            raise not_found("job", job_id)
        return b, spec

    # -- create ----------------------------------------------------------------------------------
    async def create_job(
        self, owner: str, viewer: str | None, body: Mapping[str, object]
    ) -> tuple[BatchRecord, JobSpec]:
        """A new job, its input copied and checked off the event loop (a file may be 200 MB)."""
        now = self.parts.clock.wall()
        spec = await asyncio.to_thread(parse_spec, body, now)  # its output check compiled, off the loop
        if spec.callback_url is not None and self.parts.callbacks is not None:
            self.parts.callbacks.check_url(spec.callback_url, owner, param="callback_url")
        fill, file_id, inline = self._input(body, viewer)
        job_id = new_id("job_")
        folder = self.parts.folder / job_id
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
            requests=len(requests) if inline and isinstance(requests := body["requests"], list) else 0,
            status="scheduled" if spec.not_before is not None and spec.not_before > now else "validating",
        )
        self.table.add(job_id, spec)
        self.parts.registry.add_batch(record)
        self._start(record, spec)
        return record, spec

    def _input(
        self, body: Mapping[str, object], viewer: str | None
    ) -> tuple[Callable[[Path], object], str, bool]:
        """How to fill the job's input file, the uploaded file's id ("" inline), inline or not."""
        file_id, requests = body.get("input_file_id"), body.get("requests")
        if (file_id is None) == (requests is None):
            raise bad("input_file_id", "give exactly one of 'input_file_id' and 'requests'")
        if file_id is not None:
            if not isinstance(file_id, str) or not file_id:
                raise bad("input_file_id", "expected a file id")
            source = self.parts.files.visible(file_id, viewer)
            if source.purpose != "batch":
                raise bad("input_file_id", f"file has purpose '{source.purpose}', not 'batch'", 422)
            return functools.partial(link_or_copy, self.parts.files.path(source.id)), file_id, False
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
            problems = line_problems(self.parts.config, path)
        except InputError as exc:  # empty, or nothing but blank lines: no line to name
            raise bad("requests" if inline else "input_file_id", exc.message, 422) from None
        if not problems:
            return
        first = problems[0]
        where = f"requests[{first['line'] - 1}]" if inline else "input_file_id"
        line = "" if inline else f"line {first['line']}: "
        raise bad(where, f"{line}{first['message']}", 422)

    # -- scheduling ------------------------------------------------------------------------------
    def _start(self, b: BatchRecord, spec: JobSpec) -> None:
        """Run the job now, or arm a clock timer for its `not_before`."""
        if b.status != "scheduled":
            self.runs.start(b)
            return
        left = (spec.not_before or 0.0) - self.parts.clock.wall()
        due = functools.partial(self._due, b.id)
        self._starts[b.id] = self.parts.clock.call_at(self.parts.clock.now() + max(0.0, left), due)

    def _due(self, job_id: str) -> None:
        self._starts.pop(job_id, None)
        b = self.parts.registry.get_batch(job_id)
        if b is None or b.status != "scheduled" or self.runs.closing:
            return
        b.status = "validating"
        self.parts.registry.save_batch(b)
        self.runs.start(b)

    def resume_all(self) -> int:
        """Batches and running jobs resume (`Runs.resume_all`); scheduled jobs re-arm their timer;
        paused ones stay paused."""
        started = self.runs.resume_all()
        for b in self.table.with_status("scheduled"):
            self._start(b, self.table.get(b.id) or JobSpec())
        return started

    async def close(self) -> None:
        for timer in self._starts.values():
            timer.cancel()
        await self.runs.close()

    # -- control ---------------------------------------------------------------------------------
    def pause(self, b: BatchRecord) -> BatchRecord:
        if b.status == "paused":
            return b
        if b.status not in PAUSABLE:
            raise conflict(b, "pause")
        b.status = "paused"
        b.times["paused_at"] = self.parts.now()
        self.parts.registry.save_batch(b)
        timer = self._starts.pop(b.id, None)
        if timer is not None:
            timer.cancel()
        self.runs.hold(b.id)  # its engine returns after the grace period; `paused` keeps it so
        return b

    async def resume(self, b: BatchRecord, spec: JobSpec) -> BatchRecord:
        if b.status != "paused":
            raise conflict(b, "resume")
        await self.runs.settled(b.id)  # the pause may still be stopping the engine
        now = self.parts.registry.get_batch(b.id)
        if now is None or now.status != "paused":
            raise conflict(now or b, "resume")
        ahead = spec.not_before is not None and spec.not_before > self.parts.clock.wall()
        now.status = "scheduled" if ahead else "validating"
        self.parts.registry.save_batch(now)
        self._start(now, spec)
        return now

    async def retry(self, b: BatchRecord) -> tuple[BatchRecord, int]:
        """Re-queue the failed items of a finished job and run it again; how many."""
        if b.status not in RETRYABLE or self.runs.busy(b.id):
            raise conflict(b, "retry")
        if await self.parts.store.get_job(b.job_id) is None:
            raise ServiceRequestError(
                409, f"Job '{b.id}' never ran; there is nothing to retry.", code="conflict"
            )
        requeued = await self.parts.store.requeue_failed(b.job_id)
        if requeued == 0:
            raise ServiceRequestError(409, f"Job '{b.id}' has no failed items.", code="conflict")
        b.status, b.counts, b.usage, b.errors = "validating", None, None, None
        for key in _ENDED_AT:
            b.times.pop(key, None)
        self.parts.registry.save_batch(b)
        self.runs.start(b)
        return b, requeued


def conflict(b: BatchRecord, action: str) -> ServiceRequestError:
    return ServiceRequestError(
        409, f"Cannot {action} job '{b.id}' in state '{state(b)}'.", param="id", code="conflict"
    )
