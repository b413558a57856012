"""Running a job end to end, as `batchgate run` and `batchgate resume` do: validate the input, create
or find the job in the store, hold its lock, run the engine under signal handlers, then write OUT,
the errors file and the report from the store (so each custom_id appears in OUT exactly once).
"""

from __future__ import annotations

import asyncio
import contextlib
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
from batchgate.jobs.output_check import OutputCheck
from batchgate.jobs.progress import ProgressSink, QuietSink, snapshot
from batchgate.jobs.report import (
    OPEN_SEGMENT_BLOB,
    REPORT_BLOB,
    build_report,
    dump_segments,
    fold_open_segment,
    load_invalid,
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
        # Failing, the first problem is the error itself: list only the others (one bad line, one line).
        shown = report.problems[0 if req.skip_invalid else 1 : SHOWN_PROBLEMS]
        for problem in shown:
            err(problem.describe(req.input_path))
        more = report.problem_count - (0 if req.skip_invalid else 1) - len(shown)
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
    OutputCheck(config.job.validate_regex, config.job.validate_schema, source=config.source)  # fail early
    check_output_writable(req.output_path)
    check_output_writable(req.errors_file)
    check_output_writable(req.report_file)
    report = check_input(req, config, err)
    job_id = job_id_for(req.input_path, req.output_path)
    store = await open_store(req.store_path, create=True)
    try:
        with store.lock_job(job_id):
            job = await prepare_job(store, job_id, req, report, config)
            segments = await _load_segments(store, job_id)
            await store.update_job(job_id, status="running", stop_reason=None)
            outcome = await _run_engine(store, job_id, config, req, sink, segments)
            return await _finish(store, job, outcome, req, segments, sink, out, err)
    finally:
        sink.close()
        await store.close()


async def _load_segments(store: JobStore, job_id: str) -> list[dict[str, Any]]:
    """The report segments of earlier runs, with the figures of a run that was killed folded in."""
    segments = load_segments(await store.get_blob(job_id, REPORT_BLOB))
    if fold_open_segment(segments, await store.get_blob(job_id, OPEN_SEGMENT_BLOB)):
        await store.put_blob(job_id, REPORT_BLOB, dump_segments(segments))
    await store.put_blob(job_id, OPEN_SEGMENT_BLOB, b"")
    return segments


async def _run_engine(
    store: JobStore,
    job_id: str,
    config: GatewayConfig,
    req: RunRequest,
    sink: ProgressSink,
    segments: list[dict[str, Any]],
) -> EngineOutcome:
    extra = sum(
        int(p.get("validation_tokens", 0)) for seg in segments for p in seg.get("providers", {}).values()
    )
    engine = JobEngine(config, store, job_id, options=req.engine, spent_extra_tokens=extra)
    run_id = f"run-{os.getpid()}-{time.time_ns()}"
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        first = not engine.stopping
        engine.interrupt(f"interrupted by {sig.name}")
        if first:
            sink.event(
                "stopping",
                job=job_id,
                reason=engine.stop_reason,
                grace_s=req.engine.grace_seconds,
                in_flight=_sending(engine),
            )

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    ticker = asyncio.ensure_future(_tick(engine, store, job_id, sink, run_id))
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
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        for sig in signals:
            loop.remove_signal_handler(sig)
    _publish(engine, sink, outcome.elapsed_s, outcome.statistics)
    segments.append(run_segment(outcome.statistics, outcome.elapsed_s, outcome.progress, run_id=run_id))
    return outcome


def _sending(engine: JobEngine) -> int:
    """Requests at the providers right now (the engine's other active tasks wait for quota)."""
    gw = engine.gateway
    if gw is None:
        return engine.progress.in_flight
    return sum(p.in_flight for p in gw.statistics().providers.values())


def _publish(engine: JobEngine, sink: ProgressSink, elapsed: float, stats: Any) -> dict[str, Any]:
    snap = snapshot(engine.job_id, engine.progress, stats, elapsed, time.time())
    sink.update(snap)
    return snap


async def _tick(engine: JobEngine, store: JobStore, job_id: str, sink: ProgressSink, run_id: str) -> None:
    """Refresh the display twice a second; every two seconds, store the live snapshot (for
    `batchgate status` elsewhere) and this run's report figures so far (kept if the run is killed)."""
    started = time.monotonic()
    beat = 0
    while True:
        await asyncio.sleep(0.5)
        gw = engine.gateway
        elapsed = time.monotonic() - started
        stats = gw.statistics() if gw else None
        snap = _publish(engine, sink, elapsed, stats)
        beat += 1
        if beat % 4 == 0:
            await store.put_blob(job_id, LIVE_BLOB, orjson.dumps(snap))
            if stats is not None:
                seg = run_segment(stats, elapsed, engine.progress, run_id=run_id, finished=False)
                await store.put_blob(job_id, OPEN_SEGMENT_BLOB, orjson.dumps(seg))


async def _finish(
    store: JobStore,
    job: JobRecord,
    outcome: EngineOutcome,
    req: RunRequest,
    segments: list[dict[str, Any]],
    sink: ProgressSink,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    job_id = job.job_id
    counts = await store.counts(job_id)
    unfinished = counts[TaskState.PENDING] + counts[TaskState.RUNNING]
    status = "completed" if unfinished == 0 else "stopped"
    reason = None if status == "completed" else (outcome.stop_reason or "unfinished")
    await store.update_job(job_id, status=status, stop_reason=reason)
    await store.put_blob(job_id, REPORT_BLOB, dump_segments(segments))
    await store.put_blob(job_id, OPEN_SEGMENT_BLOB, b"")
    written, failed = await write_outputs(
        store, job_id, req.output_path, req.errors_file, ordered=req.ordered
    )
    job_now = await store.get_job(job_id)
    assert job_now is not None
    invalid = await load_invalid(store, job_id)
    report = build_report(job_now, counts, await store.totals(job_id), segments, invalid=invalid)
    if outcome.emulator_stats is not None:
        report["emulator"] = _without_series(outcome.emulator_stats)
    _write_report(req.report_file, report)
    files = {"output": str(req.output_path), "errors": str(req.errors_file), "report": str(req.report_file)}
    store_hint = "" if req.store_path == DEFAULT_STORE else f" --store {req.store_path.resolve()}"
    resume = f"batchgate resume {job_id}{store_hint}"
    interrupted = bool(outcome.stop_reason and outcome.stop_reason.startswith("interrupted"))
    code = EXIT_OK if status == "completed" else EXIT_INTERRUPTED if interrupted else EXIT_STOPPED
    if status == "completed":
        sink.event("finished", job=job_id, exit_code=code, written=written, failed=failed, **files)
    else:
        sink.event(
            "stopped",
            job=job_id,
            exit_code=code,
            reason=reason,
            pending=unfinished,
            written=written,
            failed=failed,
            resume=resume,
            **files,
        )
    sink.close()  # the live display ends before the summary is printed under it
    err(render_summary(report))
    out(
        f"wrote {written} results to {req.output_path}"
        + (f" ({failed} failed, also in {req.errors_file})" if failed else "")
        + f"; report in {req.report_file}"
    )
    if status != "completed":
        err(
            f"job {job_id} stopped: {reason}. {unfinished} tasks left; resume with: {resume}  "
            "(or re-run the same command)"
        )
    return code


def _without_series(stats: dict[str, Any]) -> dict[str, Any]:
    providers = {
        name: {k: v for k, v in p.items() if k != "series"} for name, p in stats.get("providers", {}).items()
    }
    return {**stats, "providers": providers}


def _write_report(path: Path, report: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(report, option=orjson.OPT_INDENT_2))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
