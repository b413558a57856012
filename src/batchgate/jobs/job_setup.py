"""Setting a job up before it runs: the run request, the job id its paths name, the validation
pass over the input, the job created (or found and checked) in the store with its tasks, the
options it remembers (--mode, --deadline), and the output and store paths checked. A plain job's
input is stored behind the sending instead (`input_stream`)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from batchgate.clock import Clock
from batchgate.config import GatewayConfig, JobSpec
from batchgate.embedded import check_embedded, load_embedded
from batchgate.errors import InputChangedError, InputError
from batchgate.gateway import Gateway
from batchgate.jobs.cache.cached import JobCache
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import Committed, EngineOptions, ResultHook
from batchgate.jobs.finish import OutputFiles
from batchgate.jobs.fits import RouteFit
from batchgate.jobs.graph.expand import GraphTasks
from batchgate.jobs.graph.inputs import read_items, validate_items
from batchgate.jobs.graph.setup import input_items
from batchgate.jobs.graph.spec import Graph
from batchgate.jobs.ingest import INGEST_BLOB, IngestMark, input_stat
from batchgate.jobs.input.problems import invalid_input, show_problems
from batchgate.jobs.input.read import (
    InputProblem,
    ValidationReport,
    file_sha256,
    read_tasks,
    validate_input,
)
from batchgate.jobs.input.skipped import SKIPPED_BLOB, listed, skipped_lines
from batchgate.jobs.output.same_file import refuse_overwrite
from batchgate.jobs.pricing import check_prices, price_notes, unpriced_warning
from batchgate.jobs.progress.timeline import DEFAULT_EVERY_S
from batchgate.jobs.store.location import DEFAULT_STORE, StoreLocation, open_store
from batchgate.jobs.store.options import JobOptions
from batchgate.jobs.store.protocol import JobRecord, JobStore, TaskSpec
from batchgate.logs import WARNING, event, get_logger

_log = get_logger("job")


@dataclass(frozen=True, slots=True)
class RunRequest:
    input_path: Path
    config_path: Path
    output_path: Path
    store_path: StoreLocation = DEFAULT_STORE  # a SQLite file or a postgresql:// URL
    errors_path: Path | None = None
    ordered: bool = False
    skip_invalid: bool = False
    allow_changed_input: bool = False
    engine: EngineOptions = field(default_factory=EngineOptions)
    # The job's own options as this door gave them (`run` flags, `Job(...)`, the jobs API; one
    # parser: `config.job_spec`): over the config's `job:`, and remembered by the job (its retry
    # rounds excepted: `--retry-failed N` / `batchgate retry` are for this run).
    spec: JobSpec = field(default_factory=JobSpec)
    api_id: str | None = None  # `batchgate serve`: the batch or job id its API gave (kept by the job)
    quiet: bool = False  # -q: no summary table at the end
    graph: Graph | None = None  # --fanout / --pipeline (remembered by the job)
    on_result: ResultHook | None = field(default=None, compare=False)  # each outcome as it is stored
    on_commit: Committed | None = field(default=None, compare=False)  # each batch once committed
    # `batchgate serve`: many jobs in one process share one started gateway (one quota pool per
    # provider); the server hears each run's engine (to cancel it) and owns the signals itself.
    gateway: Gateway | None = field(default=None, compare=False)
    on_engine: Callable[[JobEngine], None] | None = field(default=None, compare=False)
    handle_signals: bool = True
    timeline_s: float = DEFAULT_EVERY_S  # how often the run samples its timeline (clock seconds)
    # Other files the run reads (the pipeline file) and writes (a log file), by what they are:
    # none of them may be written over (see `guard_paths`).
    extra_reads: tuple[tuple[str, Path], ...] = ()
    extra_writes: tuple[tuple[str, Path], ...] = ()
    allow_unpriced: bool = False  # --allow-unpriced: a money budget although a model has no price
    python: bool = False  # `batchgate.Job`: messages speak Python (`skip_invalid=True`)
    batch_endpoint: str | None = None  # serve's /v1/batches: the batch's endpoint, every line's
    cache: JobCache | None = field(default=None, compare=False)  # the response cache; dedupe (issue 43)

    @property
    def errors_file(self) -> Path:
        if self.errors_path is not None:
            return self.errors_path
        return self.output_path.with_name(self.output_path.name + ".errors.jsonl")

    @property
    def report_file(self) -> Path:
        return self.output_path.with_name(self.output_path.name + ".report.json")

    @property
    def files(self) -> OutputFiles:
        return OutputFiles(self.output_path, self.errors_file, self.ordered)


def appends(req: RunRequest) -> bool:
    """Whether the run appends OUT as it goes (not `--ordered`, not a fan-out or pipeline)."""
    return not req.ordered and req.graph is None


def job_id_for(input_path: Path, output_path: Path) -> str:
    """The same input and output (absolute paths) always name the same job: re-running resumes it."""
    key = f"{input_path.resolve()}\0{output_path.resolve()}".encode()
    return "job-" + hashlib.sha256(key).hexdigest()[:12]


def route_fit(req: RunRequest, config: GatewayConfig) -> RouteFit:
    """The fit check of this run's lines (serve's /v1/batches: the batch's endpoint only)."""
    return RouteFit(config, endpoint=req.batch_endpoint)


def check_input(req: RunRequest, config: GatewayConfig, err: Callable[[str], None]) -> ValidationReport:
    """The validation pass: every bad line is reported with its number before anything is sent."""
    if req.graph is not None:
        report = validate_items(req.input_path, req.graph)
    else:
        report = validate_input(
            req.input_path, known_models=config.route_models(), check=route_fit(req, config).problem
        )
    return checked(req, report, err)


def checked(
    req: RunRequest, report: ValidationReport, err: Callable[[str], None], *, sent: int | None = None
) -> ValidationReport:
    """`report` when its input may run: bad lines are told (and raise, without --skip-invalid)."""
    if report.task_count == 0 and report.problem_count == 0:
        raise InputError(str(req.input_path), None, "the input has no tasks")
    if report.problem_count:
        show_problems(req.input_path, report, err, skip_invalid=req.skip_invalid, python=req.python)
        if not req.skip_invalid:
            raise invalid_input(req.input_path, report, python=req.python, sent=sent)
        if report.task_count == 0:
            raise InputError(str(req.input_path), None, "no valid tasks left after skipping invalid lines")
    return report


def _valid_tasks(req: RunRequest, config: GatewayConfig) -> Iterator[TaskSpec]:
    if req.graph is not None:  # the root steps' tasks; later steps' are added as they become ready
        return GraphTasks(req.graph, input_items(req.input_path, req.graph)).root_tasks()
    return (
        t
        for t in read_tasks(
            req.input_path, known_models=config.route_models(), check=route_fit(req, config).problem
        )
        if isinstance(t, TaskSpec)
    )


async def open_job_store(req: RunRequest, config: GatewayConfig) -> JobStore:
    """The job store, opened (by its own thread, mostly waiting on the disk) while this thread
    imports the embedded emulator's modules, if the config embeds one."""
    opening = asyncio.ensure_future(open_store(req.store_path, create=True))
    await asyncio.sleep(0)  # the open reaches the store's thread
    try:
        load_embedded(config)
    except BaseException:
        await (await opening).close()
        raise
    return await opening


async def unchanged_job_input(store: JobStore, job_id: str, req: RunRequest) -> ValidationReport | None:
    """For a re-run: when the job exists with all its tasks and its input file is the one it was
    made from, the report of that input without a second validation pass (on a million-line input
    the pass takes longer than resuming should). The file is taken as unchanged when its size,
    mtime and inode are those recorded when it was read (`io.ingest`), else when its sha256 is
    the job's. None otherwise."""
    job = await store.get_job(job_id)
    if job is None or sum((await store.counts(job_id)).values()) < job.task_total:
        return None
    mark = IngestMark.load(await store.get_blob(job_id, INGEST_BLOB))
    same = mark is not None and mark.done and input_stat(req.input_path) == mark.stat
    sha = job.input_sha256 if same else await asyncio.to_thread(file_sha256, req.input_path)
    if sha != job.input_sha256:
        return None
    return ValidationReport(str(req.input_path), sha, job.task_total, job.task_total, 0, [])


async def prepare_job(
    store: JobStore,
    job_id: str,
    req: RunRequest,
    report: ValidationReport,
    config: GatewayConfig,
    clock: Clock,
) -> JobRecord:
    """The job with every task stored: created from the validated input, or found (its input
    unchanged, or `--allow-changed-input`) with this run's remembered options."""
    job = await store.get_job(job_id)
    if job is not None:
        if job.input_sha256 != report.sha256:
            changed_input(req, job, report.sha256)
            await store.update_job(job_id, input_sha256=report.sha256)
        job = await remember(store, job, req, config)
        if sum((await store.counts(job_id)).values()) < job.task_total:
            # An earlier run died while storing the tasks (killed, disk full): store the rest now
            # (add_tasks skips those already there), or the job would "complete" without them.
            await store.add_tasks(job_id, _valid_tasks(req, config))
        return job
    job = new_record(job_id, req, report, config, clock)
    await store.create_job(job)
    if req.skip_invalid and report.problem_count:
        await store_skipped(store, job_id, req, config, report)
    await store.add_tasks(job_id, _valid_tasks(req, config))
    return job


def changed_input(req: RunRequest, job: JobRecord, sha: str) -> None:
    """Refuse a job's changed input, unless --allow-changed-input."""
    if not req.allow_changed_input:
        raise InputChangedError(
            f"{req.input_path} changed since job {job.job_id} started (sha256 {job.input_sha256[:12] or '?'} "
            f"→ {sha[:12]}); pass --allow-changed-input to continue the job with the tasks "
            "it stored, or write to a different --output to start a new job"
        )


async def remember(store: JobStore, job: JobRecord, req: RunRequest, config: GatewayConfig) -> JobRecord:
    """--mode etc. given again: the job keeps the latest (and this run's price notes)."""
    spec = _remembered(req).over(job.options.spec)
    notes = price_notes(config)
    if (spec, notes) != (job.options.spec, job.options.price_notes):
        await store.update_job(job.job_id, options=replace(job.options, spec=spec, price_notes=notes))
        return await store.get_job(job.job_id) or job
    return job


def new_record(
    job_id: str, req: RunRequest, report: ValidationReport, config: GatewayConfig, clock: Clock
) -> JobRecord:
    now = clock.wall()
    return JobRecord(
        job_id=job_id,
        input_path=str(req.input_path.resolve()),
        input_sha256=report.sha256,
        output_path=str(req.output_path.resolve()),
        config_path=str(req.config_path.resolve()),
        status="created",
        stop_reason=None,
        created_at=now,
        updated_at=now,
        task_total=report.task_count * (len(req.graph.roots()) if req.graph else 1),
        options=JobOptions(
            spec=_remembered(req).over(_captured(config)),
            ordered=req.ordered,
            skip_invalid=req.skip_invalid,
            errors_path=str(req.errors_file.resolve()),
            skipped_lines=report.problem_count if req.skip_invalid else 0,
            skipped_first=tuple(listed(report.problems)) if req.skip_invalid else (),
            price_notes=price_notes(config),
            graph=req.graph.to_dict() if req.graph is not None else None,
            served=req.gateway is not None,  # `batchgate cancel` must not signal
            api_id=req.api_id,  # found by it in every command
        ),
    )


def with_skipped(options: JobOptions, req: RunRequest, report: ValidationReport) -> JobOptions:
    """`options` with what --skip-invalid left out of the input (nothing without it)."""
    return replace(
        options,
        skipped_lines=report.problem_count if req.skip_invalid else 0,
        skipped_first=tuple(listed(report.problems)) if req.skip_invalid else (),
    )


async def store_skipped(
    store: JobStore, job_id: str, req: RunRequest, config: GatewayConfig, report: ValidationReport
) -> None:
    """Each line --skip-invalid left out, for the errors file."""
    lines = skipped_lines(req.input_path, _all_problems(req, config, report))
    await store.put_blob(job_id, SKIPPED_BLOB, lines)


def _all_problems(req: RunRequest, config: GatewayConfig, report: ValidationReport) -> Iterator[InputProblem]:
    """Every problem of the input in line order (the report keeps only the first ones)."""
    if len(report.problems) == report.problem_count:
        return iter(report.problems)
    if req.graph is not None:
        items: Iterator[object] = read_items(req.input_path, req.graph)
    else:
        items = read_tasks(req.input_path, known_models=config.route_models(), check=RouteFit(config).problem)
    return (p for p in items if isinstance(p, InputProblem))


def _remembered(req: RunRequest) -> JobSpec:
    return replace(req.spec, retry_failed=0)


def _captured(config: GatewayConfig) -> JobSpec:
    """What a new job keeps of its config's `job:` options (so `status` and `report` show its name,
    priority, metadata and schedule without the config); its output check and retry rounds stay
    the config's, read at each run."""
    return replace(config.job.spec, validate_regex=None, validate_schema=None, retry_failed=0)


def check_request(req: RunRequest, config: GatewayConfig, err: Callable[[str], None]) -> None:
    """What must hold before a job exists: no output over a file the run reads, the whole config
    valid (its `emulator:` section included), and no unpriced model under a money budget (without
    one, a warning says which models count as free)."""
    guard_paths(req)
    check_embedded(config)
    unpriced = check_prices(config, req.allow_unpriced)
    if unpriced:
        event(_log, WARNING, "unpriced_models", models=unpriced)
        err(unpriced_warning(unpriced, config))


def guard_paths(req: RunRequest) -> None:
    """Refuse (before anything is written) a file the run writes that is one it reads: the
    output, errors file, report or store being the input, the config or the pipeline file."""
    store = req.store_path if isinstance(req.store_path, Path) else None
    writes = {
        "--output": req.output_path,
        "errors file": req.errors_file,
        "report": req.report_file,
        "job store": store,
        **dict(req.extra_writes),
    }
    reads = {"input": req.input_path, "config": req.config_path, "job store": store, **dict(req.extra_reads)}
    refuse_overwrite(writes, reads)
