"""`batchgate cancel JOB`: stop a job for good, keeping every result it has.

When no run holds the job, its recorded, unfinished provider batches are cancelled (their partial
results committed), every other unfinished task goes back to pending, OUT, the errors file and the
report are written from the store, and the job is marked stopped with reason "cancelled". When a
run holds it (another process), a cancel request is stored for that run to notice (it cancels its
batches before stopping) and the run is sent SIGTERM; once it has let the job go, the same steps as
above make sure nothing is left running. A later `batchgate run` or `resume` finishes the rest.
The store is a SQLite file or a Postgres URL; on Postgres the holder's pid is not known (its lock is
an advisory lock, perhaps on another host), so the run is not signalled: it reads the request from
the store (every few seconds while it runs, and when it stops), and cancel waits for it to let the
job go.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

from batchgate.clock import Clock, LoopClock
from batchgate.config import load_config
from batchgate.embedded import provider_urls, start_embedded
from batchgate.errors import JobError, JobLockedError
from batchgate.jobs.batch.mode import BatchModeRunner
from batchgate.jobs.batch.policy import job_config
from batchgate.jobs.engine import CANCEL_BLOB, CANCEL_REASON
from batchgate.jobs.finish import Finished, OutputFiles, finish_job
from batchgate.jobs.progress.shapes import BatchCounters
from batchgate.jobs.report.build import OPEN_SEGMENT_BLOB, REPORT_BLOB, fold_open_segment
from batchgate.jobs.report.shapes import ProviderFigures, Segment, load_segments
from batchgate.jobs.store.find import api_id, find_job
from batchgate.jobs.store.location import StoreLocation, open_store
from batchgate.jobs.store.lockfile import lock_path_for
from batchgate.jobs.store.protocol import JobRecord, JobStore
from batchgate.providers.http import create_session

LOCK_RETRY_S = 0.1  # how often to look at the lock when the holder's exit cannot be awaited


@dataclass(frozen=True, slots=True)
class CancelResult:
    job_id: str
    signalled_pid: int | None  # the run that held the job, sent SIGTERM
    batches_cancelled: int  # recorded batches this command cancelled (a running job cancels its own)
    finished: Finished


async def cancel_job(
    location: StoreLocation,
    job_id: str,
    *,
    wait_s: float = 180.0,
    say: Callable[[str], None] = print,
    clock: Clock | None = None,
) -> CancelResult:
    clock = clock or LoopClock()
    store = await open_store(location, create=False)  # a SQLite file or a Postgres URL
    try:
        job = await find_job(store, job_id)  # an id or a unique prefix
        job_id = job.job_id
        if job.options.served:  # a server's batch: its holder runs many jobs, never signal it
            raise JobError(
                f"job {job_id} belongs to `batchgate serve`'s {api_id(job) or 'batch'}: cancel it through "
                "the server's API (POST /v1/batches/{id}/cancel, or /v1/jobs/{id}/cancel for a job)"
            )
        pid: int | None = None
        try:
            with store.lock_job(job_id):
                return await _cancel_locked(store, job, None, clock)
        except JobLockedError:
            pid = _holder(location, job_id)
        await store.put_blob(job_id, CANCEL_BLOB, b"1")  # before the signal: the run reads it at its stop
        if pid is not None and pid != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        say(_running_message(job_id, pid, location, wait_s))
        deadline = clock.now() + wait_s
        waited: set[int] = set()  # holders whose exit was seen (a pidfd would wake at once)
        while True:
            try:
                with store.lock_job(job_id):
                    return await _cancel_locked(store, job, pid, clock)
            except JobLockedError:
                left = deadline - clock.now()
                if left <= 0:
                    raise JobError(
                        f"job {job_id} is still running after {wait_s:g} s; its cancel request stays "
                        "recorded (run `batchgate cancel` again, or stop it yourself)"
                    ) from None
                holder = _holder(location, job_id)
                await _wait_exit(holder if holder not in waited else None, min(left, 5.0), clock)
                if holder is not None:
                    waited.add(holder)
    finally:
        await store.close()


async def _cancel_locked(store: JobStore, job: JobRecord, pid: int | None, clock: Clock) -> CancelResult:
    """With the job locked: cancel its open batches, requeue the rest, write the outputs."""
    job_id = job.job_id
    job = await store.get_job(job_id) or job
    config = job_config(load_config(job.config_path), job)
    await store.requeue_running(job_id)
    segments = load_segments(await store.get_blob(job_id, REPORT_BLOB))
    fold_open_segment(segments, await store.get_blob(job_id, OPEN_SEGMENT_BLOB))
    started = clock.now()
    emulator = await start_embedded(config)  # the config's embedded emulator serves its batches
    try:
        urls = provider_urls(config, emulator)
        async with create_session(connect_timeout=config.settings.timeouts.connect) as session:
            runner = BatchModeRunner(config, store, job_id, session=session, base_urls=urls, clock=clock)
            await runner.cancel_all()
    finally:
        if emulator is not None:
            await emulator.__aexit__(None, None, None)
    await store.requeue_running(job_id)
    stats = runner.stats
    if stats.batches_resumed:
        segments.append(_cancel_segment(stats.to_dict(), clock.now() - started, clock.wall()))
    done = await finish_job(store, job_id, OutputFiles.of_job(job), segments, stop_reason=CANCEL_REASON)
    await store.put_blob(job_id, CANCEL_BLOB, b"")
    return CancelResult(job_id, pid, stats.batches_resumed, done)


def _cancel_segment(batches: BatchCounters, elapsed_s: float, wall: float) -> Segment:
    """The report figures of the cancel itself: the partial results it collected."""
    providers: dict[str, ProviderFigures] = {
        name: {"cost_usd": round(p["cost_usd"], 6), "batch_cost_usd": round(p["cost_usd"], 6)}
        for name, p in batches.get("by_provider", {}).items()
    }
    return {
        "run_id": f"cancel-{os.getpid()}-{int(wall * 1e9)}",
        "finished": True,
        "elapsed_ms": round(elapsed_s * 1000.0),
        "providers": providers,
        "batches": batches,
    }


def _running_message(job_id: str, pid: int | None, location: StoreLocation, wait_s: float) -> str:
    if pid is None and isinstance(location, str):  # an advisory lock names no process, maybe no host
        return (
            f"job {job_id} is running in another process: asked it (through the store) to cancel; "
            f"waiting up to {wait_s:g} s"
        )
    return f"job {job_id} is running (pid {pid or '?'}): asked it to cancel; waiting up to {wait_s:g} s"


def _holder(location: StoreLocation, job_id: str) -> int | None:
    """The pid the lock file records for the run holding the job (None on Postgres)."""
    if isinstance(location, str):
        return None
    try:
        text = lock_path_for(location, job_id).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


async def _wait_exit(pid: int | None, limit_s: float, clock: Clock) -> None:
    """Wait until process `pid` has exited (a pidfd becomes readable), at most `limit_s` seconds;
    without a pidfd, wait a short while before looking at the lock again."""
    fd: int | None = None
    if pid is not None:
        with contextlib.suppress(AttributeError, OSError):
            fd = os.pidfd_open(pid)
    if fd is None:
        await clock.sleep(min(limit_s, LOCK_RETRY_S))
        return
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not exited.done():
            exited.set_result(None)

    timer = clock.call_at(clock.now() + limit_s, readable)
    loop.add_reader(fd, readable)
    try:
        await exited
    finally:
        timer.cancel()
        loop.remove_reader(fd)
        os.close(fd)
    await asyncio.sleep(0)  # the exit is seen; the kernel has dropped its flock
