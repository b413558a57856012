"""Setting a job up before it runs: the run request, the job id its paths name, the validation
pass over the input, the job created (or found and checked) in the store with its tasks, the
options it remembers (--mode, --deadline), and the output and store paths checked; and the rounds
of `--retry-failed [N]` / `batchgate retry` (`run_in_rounds`): a job's failed tasks re-queued and
run again, at most N rounds, each re-running those that failed again; each round's last run
segment is marked, so the report counts the rounds a job has had over all its runs."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from batchgate.clock import Clock
from batchgate.config import GatewayConfig, RouteMode
from batchgate.embedded import check_embedded, load_embedded
from batchgate.errors import InputChangedError, InputError, JobError
from batchgate.gateway import Gateway
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import Committed, EngineOptions, ResultHook
from batchgate.jobs.find import API_ID_OPTION
from batchgate.jobs.finish import OutputFiles
from batchgate.jobs.fits import RouteFit
from batchgate.jobs.graph.expand import GraphTasks
from batchgate.jobs.graph.inputs import read_items, validate_items
from batchgate.jobs.graph.setup import graph_options, input_items
from batchgate.jobs.graph.spec import Graph
from batchgate.jobs.io.input import (
    InputProblem,
    ValidationReport,
    file_sha256,
    read_tasks,
    validate_input,
)
from batchgate.jobs.io.report import PRICE_NOTES_OPTION, RETRY_ROUND
from batchgate.jobs.io.same_file import refuse_overwrite
from batchgate.jobs.io.skipped import SKIPPED_BLOB, listed, skipped_lines
from batchgate.jobs.io.timeline import DEFAULT_EVERY_S
from batchgate.jobs.pricing import check_prices, price_notes, unpriced_warning
from batchgate.jobs.store.location import DEFAULT_STORE, StoreLocation, open_store
from batchgate.jobs.store.protocol import JobRecord, JobStore, TaskSpec
from batchgate.logs import WARNING, event, get_logger
from batchgate.text import plural

SHOWN_PROBLEMS = 20
_log = get_logger("job")
SHOWN_IN_ERROR = 3  # reasons a Python caller's error carries in its message (all 20 in `.problems`)


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
    mode: RouteMode | None = None  # --mode: overrides job.mode (and is remembered by the job)
    deadline_hours: float | None = None  # --deadline: overrides job.deadline_hours (remembered)
    retry_failed: int = 0  # --retry-failed N / `batchgate retry`: rounds of failed items run again
    priority: str | None = None  # --priority: workers take a higher one's chunks first (remembered)
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
    chat_only: bool = False  # serve's /v1/batches: its endpoint is chat, so every line must be

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


def with_job_overrides(
    config: GatewayConfig, mode: RouteMode | None, deadline_hours: float | None
) -> GatewayConfig:
    """The config with `job.mode` / `job.deadline_hours` replaced by the given ones (None: kept)."""
    job = config.job
    if mode is not None:
        job = replace(job, mode=mode)
    if deadline_hours is not None:
        job = replace(job, deadline_hours=deadline_hours)
    return replace(config, job=job)


def job_id_for(input_path: Path, output_path: Path) -> str:
    """The same input and output (absolute paths) always name the same job: re-running resumes it."""
    key = f"{input_path.resolve()}\0{output_path.resolve()}".encode()
    return "job-" + hashlib.sha256(key).hexdigest()[:12]


def _route_fit(req: RunRequest, config: GatewayConfig) -> RouteFit:
    """The fit check with this run's --mode (a Batch API mode takes chat lines only, for now)."""
    return RouteFit(with_job_overrides(config, req.mode, None), chat_only=req.chat_only)


def check_input(req: RunRequest, config: GatewayConfig, err: Callable[[str], None]) -> ValidationReport:
    """The validation pass: every bad line is reported with its number before anything is sent."""
    if req.graph is not None:
        report = validate_items(req.input_path, req.graph)
    else:
        report = validate_input(
            req.input_path, known_models=config.route_models(), check=_route_fit(req, config).problem
        )
    if report.task_count == 0 and report.problem_count == 0:
        raise InputError(str(req.input_path), None, "the input has no tasks")
    if report.problem_count:
        _show_problems(req, report, err)
        if not req.skip_invalid:
            raise _invalid_input(req, report)
        if report.task_count == 0:
            raise InputError(str(req.input_path), None, "no valid tasks left after skipping invalid lines")
    return report


def _invalid_input(req: RunRequest, report: ValidationReport) -> InputError:
    """The error of an input with bad lines; from Python it names `skip_invalid=True` and carries
    the first reasons (the CLI printed them above it)."""
    first = report.problems[0]
    hint = "skip_invalid=True" if req.python else "--skip-invalid"
    in_all = f"{plural(report.problem_count, 'invalid line')} in all; nothing was sent"
    problems = [(p.line_no, p.reason) for p in report.problems[:SHOWN_PROBLEMS]]
    if report.problem_count == 1:  # one bad line, one line: the error names it
        reason = f"{first.reason} ({in_all}; fix it or pass {hint})"
        return InputError(str(req.input_path), first.line_no, reason, problems=problems)
    listed = ""
    if req.python:
        shown = "; ".join(f"line {n}: {why}" for n, why in problems[:SHOWN_IN_ERROR])
        more = " ..." if report.problem_count > SHOWN_IN_ERROR else ""
        listed = f": {shown}{more}"
    reason = f"{in_all} (the first on line {first.line_no}){listed}; fix them or pass {hint}"
    return InputError(str(req.input_path), None, reason, problems=problems)


def _show_problems(req: RunRequest, report: ValidationReport, err: Callable[[str], None]) -> None:
    """The problems in input order (a lone problem is the error itself, so it is not repeated)."""
    if report.problem_count == 1 and not req.skip_invalid:
        return
    shown = report.problems[:SHOWN_PROBLEMS]
    for problem in shown:
        err(problem.describe(req.input_path))
    more = report.problem_count - len(shown)
    if more > 0:
        err(f"... and {plural(more, 'more invalid line')}")
    if req.skip_invalid:
        hint = "skip_invalid=True" if req.python else "--skip-invalid"
        err(f"skipping {plural(report.problem_count, 'invalid line')} ({hint})")


def _valid_tasks(req: RunRequest, config: GatewayConfig) -> Iterator[TaskSpec]:
    if req.graph is not None:  # the root steps' tasks; later steps' are added as they become ready
        return GraphTasks(req.graph, input_items(req.input_path, req.graph)).root_tasks()
    return (
        t
        for t in read_tasks(
            req.input_path, known_models=config.route_models(), check=_route_fit(req, config).problem
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
    """For a re-run: when the job exists with all its tasks and its input file is byte-for-byte the
    one it was made from, the report of that input without a second validation pass (on a
    million-line input the pass takes longer than resuming should). None otherwise."""
    job = await store.get_job(job_id)
    if job is None or sum((await store.counts(job_id)).values()) < job.task_total:
        return None
    sha = file_sha256(req.input_path)
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
        remembered = _remembered(req) | _price_notes(config)
        if any(job.options.get(k) != v for k, v in remembered.items()):  # --mode etc. again: the latest
            await store.update_job(job_id, options={**job.options, **remembered})
            job = await store.get_job(job_id) or job
        if sum((await store.counts(job_id)).values()) < job.task_total:
            # An earlier run died while storing the tasks (killed, disk full): store the rest now
            # (add_tasks skips those already there), or the job would "complete" without them.
            await store.add_tasks(job_id, _valid_tasks(req, config))
        return job
    now = clock.wall()
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
        task_total=report.task_count * (len(req.graph.roots()) if req.graph else 1),
        options={
            "ordered": req.ordered,
            "skip_invalid": req.skip_invalid,
            "errors_path": str(req.errors_file.resolve()),
            "skipped_lines": report.problem_count if req.skip_invalid else 0,
            "skipped_first": listed(report.problems) if req.skip_invalid else [],
            **_remembered(req),
            **_price_notes(config),
            **graph_options(req.graph),
            **({"served": True} if req.gateway is not None else {}),  # `batchgate cancel` must not signal
            **({API_ID_OPTION: req.api_id} if req.api_id else {}),  # found by it in every command
        },
    )
    await store.create_job(job)
    if req.skip_invalid and report.problem_count:  # each skipped line, for the errors file
        lines = skipped_lines(req.input_path, _all_problems(req, config, report))
        await store.put_blob(job_id, SKIPPED_BLOB, lines)
    await store.add_tasks(job_id, _valid_tasks(req, config))
    return job


def _price_notes(config: GatewayConfig) -> dict[str, Any]:
    """The models this run prices from the built-in table, for the report to say so."""
    return {PRICE_NOTES_OPTION: price_notes(config)}


def _all_problems(req: RunRequest, config: GatewayConfig, report: ValidationReport) -> Iterator[InputProblem]:
    """Every problem of the input in line order (the report keeps only the first ones)."""
    if len(report.problems) == report.problem_count:
        return iter(report.problems)
    if req.graph is not None:
        items: Iterator[object] = read_items(req.input_path, req.graph)
    else:
        items = read_tasks(req.input_path, known_models=config.route_models(), check=RouteFit(config).problem)
    return (p for p in items if isinstance(p, InputProblem))


def _remembered(req: RunRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if req.mode is not None:
        out["mode"] = req.mode
    if req.deadline_hours is not None:
        out["deadline_hours"] = req.deadline_hours
    if req.priority is not None:
        out["priority"] = req.priority
    return out


def job_config(config: GatewayConfig, job: JobRecord) -> GatewayConfig:
    """The config a job runs with: its remembered --mode / --deadline applied."""
    mode, hours = job.options.get("mode"), job.options.get("deadline_hours")
    return with_job_overrides(
        config,
        mode if mode in ("online", "batch-api", "auto") else None,
        float(hours) if isinstance(hours, int | float) else None,
    )


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


def check_output_writable(path: Path) -> None:
    parent = path.resolve().parent
    if not parent.is_dir():
        raise JobError(f"{path}: cannot write output: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise JobError(f"{path}: cannot write output: directory {parent} is not writable")
    if path.exists() and path.is_dir():
        raise JobError(f"{path}: cannot write output: it is a directory")


# -- --retry-failed rounds ----------------------------------------------------------------------


class _Outcome(Protocol):
    @property
    def status(self) -> str: ...


_O = TypeVar("_O", bound=_Outcome)
_G = TypeVar("_G")


async def run_in_rounds(
    store: JobStore,
    job_id: str,
    rounds: int,
    run: Callable[[], Awaitable[tuple[_O, _G]]],
    segments: list[dict[str, Any]],
    say: Callable[[str], None],
) -> tuple[_O, _G]:
    """Run the job (`run`), with up to `rounds` rounds of its failed tasks re-queued first."""
    done = 0
    if rounds:
        done = 1
        say(f"re-queued {plural(await store.requeue_failed(job_id), 'failed item')} of job {job_id}")
    outcome, extra = await run()
    _mark(segments, done)
    while done < rounds and outcome.status == "completed":
        requeued = await store.requeue_failed(job_id)
        if not requeued:
            break
        done += 1
        say(f"round {done} of {rounds}: re-queued {plural(requeued, 'item')} that failed again")
        outcome, extra = await run()
        _mark(segments, done)
    return outcome, extra


def _mark(segments: list[dict[str, Any]], round_no: int) -> None:
    if round_no and segments:
        segments[-1][RETRY_ROUND] = round_no
