"""A plain job's input stored behind the sending (`io.ingest` reads and stores it): a new job is
created once its first lines are validated and stored, and its first requests leave while the
rest is read; a re-run of a job whose input is not all stored checks the stored part unchanged,
sends its pending tasks at once and stores the rest as it reads. With a Batch API in play the
whole input is stored before the run starts (batch mode groups the pending tasks then).

A bad line read after the first requests left (without --skip-invalid) ends the storing: the
tasks stored before it are still sent and written, nothing after them; the job ends stopped,
every bad line is told and the run raises `InputError`; once the lines are fixed, a re-run
continues the job from its stored part."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from batchgate.clock import Clock
from batchgate.config import GatewayConfig
from batchgate.jobs.batch.policy import job_config, may_batch
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.ingest import (
    FIRST_CHUNK,
    INGEST_BLOB,
    Ingest,
    IngestMark,
    InputPass,
    input_stat,
    prefix_sha256,
)
from batchgate.jobs.input.read import ValidationReport, file_sha256
from batchgate.jobs.job_setup import (
    RunRequest,
    changed_input,
    check_input,
    checked,
    new_record,
    prepare_job,
    remember,
    route_fit,
    store_skipped,
    unchanged_job_input,
    with_skipped,
)
from batchgate.jobs.store.protocol import JobRecord, JobStore


def open_input(req: RunRequest, config: GatewayConfig, err: Callable[[str], None]) -> InputPass:
    """A new job's input, its first lines validated (a bad one among them: the whole file is
    validated and its bad lines told, raising without --skip-invalid; nothing is created)."""
    reading = InputPass(
        req.input_path, config.route_models(), route_fit(req, config).problem, skip_invalid=req.skip_invalid
    )
    reading.pending = reading.take(FIRST_CHUNK)
    if reading.failed or reading.done:
        if reading.failed:
            reading.finish()
        checked(req, reading.report(), err)
    return reading


async def set_up_job(
    store: JobStore,
    job_id: str,
    req: RunRequest,
    config: GatewayConfig,
    clock: Clock,
    err: Callable[[str], None],
    first: InputPass | ValidationReport | None = None,
) -> tuple[JobRecord, Ingest | None]:
    """The job, and for a plain job whose input is not all stored yet the `Ingest` that stores the
    rest behind the sending (with a Batch API in play, all of it is stored first: batch mode
    groups the job's pending tasks when the run starts). `first`: what was read before the store
    was opened (`open_input`'s pass; a graph job's whole validation)."""
    job = await store.get_job(job_id)
    if req.graph is not None or (job is not None and job.input_sha256):  # all stored: as before
        report = first if isinstance(first, ValidationReport) else None
        report = report or ((await unchanged_job_input(store, job_id, req)) if job is not None else None)
        return await prepare_job(
            store, job_id, req, report or check_input(req, config, err), config, clock
        ), None
    if job is None:
        reading = first if isinstance(first, InputPass) else open_input(req, config, err)
        job = new_record(job_id, req, replace(reading.report(), sha256=""), config, clock)
        await store.create_job(job)
        ingest = Ingest(reading, store, job_id, stored=0, cache=req.cache)
        await ingest.store_chunk(reading.pending)
    else:
        mark = IngestMark.load(await store.get_blob(job_id, INGEST_BLOB))
        if mark is not None and input_stat(req.input_path) != mark.stat:
            sha = await asyncio.to_thread(prefix_sha256, req.input_path, mark.offset)
            if sha != mark.sha256:  # the part already stored changed
                changed_input(req, job, sha)
                await _end_input(store, job_id, file_sha256(req.input_path), None)  # the stored tasks only
                return await remember(store, job, req, config), None
        job = await remember(store, job, req, config)
        reading = InputPass(
            req.input_path,
            config.route_models(),
            route_fit(req, config).problem,
            skip_invalid=req.skip_invalid,
        )
        stored = sum((await store.counts(job_id)).values())
        marked = mark.offset if mark is not None else 0
        ingest = Ingest(reading, store, job_id, stored=stored, marked=marked, cache=req.cache)
    if may_batch(job_config(config, job)):
        await ingest.run()
        await end_ingest(store, job_id, ingest, req, config, err, sending=False)
        return await store.get_job(job_id) or job, None
    return job, ingest


async def end_ingest(
    store: JobStore,
    job_id: str,
    ingest: Ingest,
    req: RunRequest,
    config: GatewayConfig,
    err: Callable[[str], None],
    *,
    sending: bool = True,
) -> None:
    """The input read to its end: a bad line is told (and raises: its job stays resumable, the
    input stored up to it); else the job gets its sha256, total and the lines --skip-invalid left out."""
    reading = ingest.reading
    if not reading.done:
        return  # the run stopped first: the next one reads on
    sent = ingest.stored if ingest.failed and sending else None  # `sending`: the run sent as it read
    report = checked(req, reading.report(), err, sent=sent)
    job = await store.get_job(job_id)
    if job is not None and req.skip_invalid and report.problem_count:
        await store.update_job(job_id, options=with_skipped(job.options, req, report))
        await store_skipped(store, job_id, req, config, report)
    await _end_input(store, job_id, report.sha256, reading.mark())


async def _end_input(store: JobStore, job_id: str, sha: str, mark: IngestMark | None) -> None:
    if mark is not None:
        await store.put_blob(job_id, INGEST_BLOB, replace(mark, done=True).dump())
    total = sum((await store.counts(job_id)).values())
    await store.update_job(job_id, input_sha256=sha, task_total=total)


def feed(req: RunRequest, ingest: Ingest | None) -> tuple[RunRequest, asyncio.Future[bool] | None]:
    """Start storing the rest of the input behind the sending; each engine of the run is told."""
    if ingest is None:
        return req, None
    feeding = asyncio.ensure_future(ingest.run())
    ingest.on_done = req.on_commit  # the cache's answers are appended to OUT as they are stored
    hear = req.on_engine

    def on_engine(engine: JobEngine) -> None:
        ingest.sink = engine
        engine.feed_from(feeding, ingest.claimed)
        if hear is not None:
            hear(engine)

    return replace(req, on_engine=on_engine), feeding


async def stop_feeding(ingest: Ingest | None, feeding: asyncio.Future[bool] | None) -> str | None:
    """The run ended: stop storing (a bad line's pass is let finish, to tell every problem); why
    the job cannot be complete when its input is not all stored, else None."""
    if ingest is None or feeding is None:
        return None
    if not ingest.failed:
        feeding.cancel()
    await asyncio.gather(feeding, return_exceptions=True)
    if ingest.failed:
        return f"invalid input on line {ingest.reading.problems[0].line_no}"
    return None if ingest.reading.done else "the input is not all stored yet"
