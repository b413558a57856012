"""Running a job end to end, as `batchgate run` and `batchgate resume` do: validate the input, create
or find the job in the store, hold its lock, run the engine under signal handlers, then write OUT,
the errors file and the report from the store (so each custom_id appears in OUT exactly once).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from batchgate.config import GatewayConfig
from batchgate.errors import InputChangedError, InputError, JobError
from batchgate.jobs.engine import EngineOptions, EngineOutcome, JobEngine
from batchgate.jobs.input import ValidationReport, read_tasks, validate_input
from batchgate.jobs.output import write_outputs
from batchgate.jobs.progress import ProgressSink, QuietSink, snapshot
from batchgate.jobs.report import (
    REPORT_BLOB,
    build_report,
    dump_segments,
    load_invalid_ids,
    load_segments,
    render_summary,
    run_segment,
)
from batchgate.jobs.sqlite_store import SqliteJobStore
from batchgate.jobs.store import JobRecord, JobStore, TaskSpec, TaskState

DEFAULT_STORE = Path(".batchgate") / "jobs.db"
LIVE_BLOB = "live"
EXIT_OK = 0
EXIT_STOPPED = 3
EXIT_INTERRUPTED = 130
SHOWN_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class RunRequest:
    input_path: Path
    config_path: Path
    output_path: Path
    store_path: Path = DEFAULT_STORE
    errors_path: Path | None = None
    ordered: bool = False
    skip_invalid: bool = False
    allow_changed_input: bool = False
    engine: EngineOptions = field(default_factory=EngineOptions)

    @property
    def errors_file(self) -> Path:
        if self.errors_path is not None:
            return self.errors_path
        return self.output_path.with_name(self.output_path.name + ".errors.jsonl")

    @property
    def report_file(self) -> Path:
        return self.output_path.with_name(self.output_path.name + ".report.json")


def job_id_for(input_path: Path, output_path: Path) -> str:
    """The same input and output (absolute paths) always name the same job: re-running resumes it."""
    key = f"{input_path.resolve()}\0{output_path.resolve()}".encode()
    return "job-" + hashlib.sha256(key).hexdigest()[:12]


def check_input(req: RunRequest, config: GatewayConfig, err: Callable[[str], None]) -> ValidationReport:
    """The validation pass: every bad line is reported with its number before anything is sent."""
    report = validate_input(req.input_path, known_models=config.route_models())
    if report.task_count == 0 and report.problem_count == 0:
        raise InputError(str(req.input_path), None, "the input has no tasks")
    if report.problem_count:
        for problem in report.problems[:SHOWN_PROBLEMS]:
            err(problem.describe(req.input_path))
        more = report.problem_count - min(SHOWN_PROBLEMS, len(report.problems))
        if more > 0:
            err(f"... and {more} more problems")
        if not req.skip_invalid:
            first = report.problems[0]
            raise InputError(
                str(req.input_path),
                first.line_no,
                f"{first.reason} ({report.problem_count} invalid lines in all; nothing was sent; "
                "fix them or pass --skip-invalid)",
            )
        if report.task_count == 0:
            raise InputError(str(req.input_path), None, "no valid tasks left after skipping invalid lines")
    return report


async def prepare_job(
    store: JobStore, job_id: str, req: RunRequest, report: ValidationReport, config: GatewayConfig
) -> JobRecord:
    job = await store.get_job(job_id)
    if job is not None:
        if job.input_sha256 != report.sha256:
            if not req.allow_changed_input:
                raise InputChangedError(
                    f"{req.input_path} changed since job {job_id} started (sha256 {job.input_sha256[:12]} "
                    f"→ {report.sha256[:12]}); pass --allow-changed-input to continue the job with the tasks "
                    "it stored, or write to a different --output to start a new job"
                )
            await store.update_job(job_id, input_sha256=report.sha256)
        return job
    now = time.time()
    job = JobRecord(
        job_id=job_id,
        input_path=str(req.input_path.resolve()),
        input_sha256=report.sha256,
        output_path=str(req.output_path.resolve()),
        config_path=str(req.config_path.resolve()),
        status="created",
        stop_reason=None,
        created_at=now,
        updated_at=now,
        task_total=report.task_count,
        options={
            "ordered": req.ordered,
            "skip_invalid": req.skip_invalid,
            "errors_path": str(req.errors_file.resolve()),
        },
    )
    await store.create_job(job)
    specs = (
        t for t in read_tasks(req.input_path, known_models=config.route_models()) if isinstance(t, TaskSpec)
    )
    await store.add_tasks(job_id, specs)
    return job


def check_output_writable(path: Path) -> None:
    parent = path.resolve().parent
    if not parent.is_dir():
        raise JobError(f"{path}: cannot write output: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise JobError(f"{path}: cannot write output: directory {parent} is not writable")
    if path.exists() and path.is_dir():
        raise JobError(f"{path}: cannot write output: it is a directory")


async def open_store(path: Path, *, create: bool) -> SqliteJobStore:
    """Open the job database; `create` makes its folder (owner-only) when missing."""
    if create and not path.parent.exists():
        try:
            path.parent.mkdir(mode=0o700, parents=True)
        except OSError as exc:
            raise JobError(f"{path}: cannot create the job store folder ({exc.strerror})") from None
    elif not create and not path.exists():
        raise JobError(f"no job store at {path} (pass --store)")
    return await SqliteJobStore.open(path)


async def run_job(
    req: RunRequest,
    config: GatewayConfig,
    sink: ProgressSink | None = None,
    *,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> int:
    sink = sink or QuietSink()
    check_output_writable(req.output_path)
    check_output_writable(req.errors_file)
    report = check_input(req, config, err)
    job_id = job_id_for(req.input_path, req.output_path)
    store = await open_store(req.store_path, create=True)
    try:
        with store.lock_job(job_id):
            job = await prepare_job(store, job_id, req, report, config)
            await store.update_job(job_id, status="running", stop_reason=None)
            outcome = await _run_engine(store, job_id, config, req, sink)
            return await _finish(store, job, outcome, req, out, err)
    finally:
        sink.close()
        await store.close()


async def _run_engine(
    store: JobStore, job_id: str, config: GatewayConfig, req: RunRequest, sink: ProgressSink
) -> EngineOutcome:
    engine = JobEngine(config, store, job_id, options=req.engine)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, engine.request_stop, f"interrupted by {signal.Signals(sig).name}")
    ticker = asyncio.ensure_future(_tick(engine, store, job_id, sink))
    try:
        counts = await store.counts(job_id)
        sink.event(
            "started",
            job=job_id,
            total=sum(counts.values()),
            done=counts[TaskState.SUCCEEDED] + counts[TaskState.FAILED],
            pending=counts[TaskState.PENDING] + counts[TaskState.RUNNING],
        )
        outcome = await engine.run()
    finally:
        ticker.cancel()
        for sig in signals:
            loop.remove_signal_handler(sig)
    _publish(engine, sink, outcome.elapsed_s, outcome.statistics)
    return outcome


def _publish(engine: JobEngine, sink: ProgressSink, elapsed: float, stats: Any) -> dict[str, Any]:
    snap = snapshot(engine.job_id, engine.progress, stats, elapsed, time.time())
    sink.update(snap)
    return snap


async def _tick(engine: JobEngine, store: JobStore, job_id: str, sink: ProgressSink) -> None:
    """Refresh the display twice a second and the store's live snapshot every two seconds."""
    started = time.monotonic()
    beat = 0
    while True:
        await asyncio.sleep(0.5)
        gw = engine.gateway
        snap = _publish(engine, sink, time.monotonic() - started, gw.statistics() if gw else None)
        beat += 1
        if beat % 4 == 0:
            await store.put_blob(job_id, LIVE_BLOB, orjson.dumps(snap))


async def _finish(
    store: JobStore,
    job: JobRecord,
    outcome: EngineOutcome,
    req: RunRequest,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    job_id = job.job_id
    counts = await store.counts(job_id)
    unfinished = counts[TaskState.PENDING] + counts[TaskState.RUNNING]
    status = "completed" if outcome.status == "completed" and unfinished == 0 else "stopped"
    await store.update_job(job_id, status=status, stop_reason=outcome.stop_reason)
    blob = await store.get_blob(job_id, REPORT_BLOB)
    segments = load_segments(blob)
    segments.append(run_segment(outcome.statistics, outcome.elapsed_s, outcome.progress.cost_by_provider))
    invalid = load_invalid_ids(blob) + outcome.progress.invalid_ids
    await store.put_blob(job_id, REPORT_BLOB, dump_segments(segments, invalid))
    written, failed = await write_outputs(
        store, job_id, req.output_path, req.errors_file, ordered=req.ordered
    )
    job_now = await store.get_job(job_id)
    assert job_now is not None
    report = build_report(job_now, counts, await store.totals(job_id), segments, invalid_ids=invalid)
    if outcome.emulator_stats is not None:
        report["emulator"] = outcome.emulator_stats
    _write_report(req.report_file, report)
    err(render_summary(report))
    out(
        f"wrote {written} results to {req.output_path}"
        + (f" ({failed} failed, also in {req.errors_file})" if failed else "")
        + f"; report in {req.report_file}"
    )
    if status == "stopped":
        err(
            f"job {job_id} stopped: {outcome.stop_reason or 'unfinished'}. {unfinished} tasks left; "
            f"resume with: batchgate resume {job_id}"
            + (f" --store {req.store_path}" if req.store_path != DEFAULT_STORE else "")
            + "  (or re-run the same command)"
        )
        reason = outcome.stop_reason or ""
        return EXIT_INTERRUPTED if reason.startswith("interrupted") else EXIT_STOPPED
    return EXIT_OK


def _write_report(path: Path, report: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(report, option=orjson.OPT_INDENT_2))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
