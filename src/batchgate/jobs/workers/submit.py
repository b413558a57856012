"""`batchgate run --submit-only`: create a job in the store for `batchgate worker` processes and
exit without sending anything. The input is validated and stored as `batchgate run` does it; the
job is marked with the `workers` option, which is what workers look for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from batchgate.clock import Clock, LoopClock
from batchgate.config import GatewayConfig
from batchgate.errors import JobError
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.job_setup import (
    RunRequest,
    check_input,
    check_request,
    job_id_for,
    prepare_job,
    unchanged_job_input,
)
from batchgate.jobs.output.same_file import check_output_writable
from batchgate.jobs.store.location import open_store, store_exists
from batchgate.jobs.store.protocol import TaskState
from batchgate.text import plural


async def submit_job(
    req: RunRequest, config: GatewayConfig, err: Callable[[str], None], clock: Clock | None = None
) -> tuple[str, int]:
    """Create (or re-submit) the job for workers; returns its id and the tasks left to run."""
    if req.graph is not None:
        raise JobError("--submit-only does not take fan-out or pipeline jobs yet (workers send plain tasks)")
    if (req.spec.mode or config.job.mode) == "batch-api":
        raise JobError(
            "--submit-only sends live: workers do not use provider Batch APIs yet (use --mode online)"
        )
    OutputCheck(config.job.validate_regex, config.job.validate_schema, source=config.source)  # fail early
    check_request(req, config, err)  # before a job exists: no output over an input, the whole config valid
    for path in (req.output_path, req.errors_file, req.report_file):
        check_output_writable(path)
    job_id = job_id_for(req.input_path, req.output_path)
    report = None if store_exists(req.store_path) else check_input(req, config, err)
    store = await open_store(req.store_path, create=True)
    try:
        with store.lock_job(job_id):  # not while a `batchgate run` of the same job holds it
            if report is None:
                report = await unchanged_job_input(store, job_id, req) or check_input(req, config, err)
            job = await prepare_job(store, job_id, req, report, config, clock or LoopClock())
            if not job.options.workers:
                await store.requeue_running(job_id)  # a crashed `batchgate run`'s claims (no lease)
            if req.spec.retry_failed:
                err(f"re-queued {plural(await store.requeue_failed(job_id), 'failed item')} of job {job_id}")
            counts = await store.counts(job_id)
            left = counts[TaskState.PENDING] + counts[TaskState.RUNNING]
            status = "created" if left else job.status
            await store.update_job(job_id, status=status, options=replace(job.options, workers=True))
            return job_id, left
    finally:
        await store.close()
