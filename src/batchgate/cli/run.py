"""`batchgate run`, `batchgate resume` and `batchgate plan`: the user's main job.

Registering the parsers imports nothing heavy (so `batchgate --help` starts fast); the engine, the
HTTP stack and the store are imported by the handler that runs."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from batchgate.cli import observing
from batchgate.cli.arg_types import non_negative_float, positive_float, positive_int
from batchgate.cli.cache_option import add_cache_options, with_cache_options
from batchgate.cli.config_file import load_config
from batchgate.cli.job_flags import add_mode_options, add_spec_options, mode_fields, spec_fields, spec_of
from batchgate.cli.quota_option import add_quota_option, quota_spec
from batchgate.errors import JobError
from batchgate.jobs.store.find import find_job
from batchgate.jobs.store.location import (
    DEFAULT_STORE,
    choose_location,
    open_store,
    parse_location,
    resume_hint,
)

if TYPE_CHECKING:
    from batchgate.config import GatewayConfig
    from batchgate.jobs.engine_types import EngineOptions
    from batchgate.jobs.job_setup import RunRequest
    from batchgate.jobs.store.protocol import JobRecord


def _add_run_options(p: argparse.ArgumentParser) -> None:
    add_spec_options(p)  # --mode, --deadline, --name, --priority, --not-before, --callback-url, ...
    p.add_argument(
        "--store",
        type=parse_location,
        default=None,
        help=f"job store: a SQLite file or a postgresql:// URL (default: job.store, else {DEFAULT_STORE})",
    )
    add_quota_option(p)
    add_cache_options(p)  # --cache, --no-dedupe (issue 43)
    p.add_argument("--errors", type=Path, default=None, help="errors file (default: OUTPUT.errors.jsonl)")
    p.add_argument(
        "--ordered", action="store_true", help="write OUT in input order (default: completion order)"
    )
    p.add_argument("--skip-invalid", action="store_true", help="run without the input's invalid lines")
    p.add_argument(
        "--allow-changed-input",
        action="store_true",
        help="continue an existing job although its input file changed",
    )
    p.add_argument(
        "--allow-unpriced",
        action="store_true",
        help="run under budget.max_cost_usd although a model has no price (its spend counts as $0)",
    )
    p.add_argument("--concurrency", type=positive_int, help="override the global concurrency")
    p.add_argument("--max-attempts", type=positive_int, help="override the attempts per item")
    p.add_argument("--timeout", type=positive_float, help="override the per-request total timeout (s)")
    p.add_argument(
        "--grace",
        type=non_negative_float,
        default=10.0,
        help="seconds in-flight work gets on Ctrl-C/SIGTERM (default: %(default)s; a second Ctrl-C cuts it)",
    )
    p.add_argument(
        "--progress",
        choices=("auto", "rich", "lines", "json", "quiet"),
        default="auto",
        help="live display (rich), a progress line every --progress-every seconds on stderr (lines; "
        "auto picks it when stderr is not a terminal), JSON-lines events on stdout, or nothing",
    )
    p.add_argument(
        "--progress-every",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="seconds between progress lines when not on a terminal (default: %(default)s)",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no live display and no summary table: only what was written, and errors",
    )
    _add_retry_option(p)
    observing.add_options(p)


def _add_retry_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--retry-failed",
        nargs="?",
        const="1",
        default=None,
        metavar="N",
        help="run the job's failed items again, in the same job and output: at most N rounds "
        "(default 1), each re-running those that failed again",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help="run a JSONL batch durably (re-run the same command to resume)")
    run.add_argument("input", type=Path, help="JSONL input (OpenAI Batch, Anthropic batch or plain lines)")
    run.add_argument("--config", type=Path, required=True, help="gateway config (YAML)")
    run.add_argument("--output", type=Path, required=True, help="results (JSONL, OpenAI Batch output shape)")
    run.add_argument("--dry-run", action="store_true", help="print the plan and send nothing")
    run.add_argument(
        "--submit-only",
        action="store_true",
        help="create the job in --store and exit without sending: `batchgate worker` processes run it",
    )
    run.add_argument(
        "--fanout",
        metavar="ROUTES",
        help="comma-separated routes: run every line on each, one joined output line per input",
    )
    run.add_argument(
        "--pipeline", type=Path, metavar="FILE", help="pipeline file (YAML): steps per input line"
    )
    _add_run_options(run)
    run.set_defaults(handler=_run)

    resume = sub.add_parser("resume", help="continue a stopped or crashed job")
    resume.add_argument("job", nargs="?", help="job id or a unique prefix (default: the latest job)")
    resume.add_argument("--config", type=Path, default=None, help="config (default: the one the job used)")
    _add_run_options(resume)
    resume.set_defaults(handler=_resume)

    retry = sub.add_parser(
        "retry", help="re-queue a job's failed items and run exactly those again (--retry-failed N: rounds)"
    )
    retry.add_argument("job", nargs="?", help="job id or a unique prefix (default: the latest job)")
    retry.add_argument("--config", type=Path, default=None, help="config (default: the one the job used)")
    _add_run_options(retry)
    retry.set_defaults(handler=_resume, retry_failed="1")

    plan = sub.add_parser("plan", help="projected tokens, cost and time per provider; sends nothing")
    plan.add_argument("input", type=Path)
    plan.add_argument("--config", type=Path, required=True)
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument("--skip-invalid", action="store_true")
    add_mode_options(plan)  # --mode, --deadline: as `run` takes them
    plan.set_defaults(handler=_plan)


def _engine_options(args: argparse.Namespace) -> EngineOptions:
    from batchgate.jobs.engine_types import EngineOptions  # noqa: PLC0415 — start-up: only to run

    return EngineOptions(
        concurrency=args.concurrency,
        max_attempts=args.max_attempts,
        timeout=args.timeout,
        grace_seconds=args.grace,
        quota_store=getattr(args, "quota_spec", None),
    )


def retry_rounds(args: argparse.Namespace) -> int:
    """`--retry-failed [N]` as a number of rounds (0: not given). A job id right after the flag
    (`resume --retry-failed JOB`) is the job, with the default of one round."""
    value = args.retry_failed
    if value is None:
        return 0
    if value.isdigit() and int(value) > 0:
        return int(value)
    if getattr(args, "job", "") is None and not value.isdigit():
        args.job, args.retry_failed = value, "1"
        return 1
    raise JobError(f"--retry-failed takes a number of rounds (1 or more), got {value!r}")


def _request(args: argparse.Namespace, input_path: Path, config: Path, output: Path) -> RunRequest:
    from batchgate.jobs.job_setup import RunRequest  # noqa: PLC0415 — start-up: the job machinery only to run

    return RunRequest(
        input_path=input_path,
        config_path=config,
        output_path=output,
        store_path=args.store,
        errors_path=args.errors,
        ordered=args.ordered,
        skip_invalid=args.skip_invalid,
        allow_changed_input=args.allow_changed_input,
        engine=_engine_options(args),
        spec=spec_of(spec_fields(args, retry_rounds(args))),
        quiet=args.quiet,
        allow_unpriced=args.allow_unpriced,
        extra_reads=(("pipeline file", args.pipeline),) if getattr(args, "pipeline", None) else (),
        extra_writes=(("log file", args.log_file),) if args.log_file is not None else (),
    )


def _run(args: argparse.Namespace) -> int:
    _import_http_stack()
    from batchgate.jobs.graph.setup import requested_graph  # noqa: PLC0415 — start-up: only to run

    config = load_config(args.config)
    graph = requested_graph(config, args.fanout, args.pipeline)
    if args.dry_run:
        if graph is not None:
            raise JobError("--dry-run does not plan fan-out or pipeline jobs yet")
        args.json = False
        return _plan(args)
    args.store = choose_location(args.store, config.job.store)
    args.quota_spec = quota_spec(args, config)
    req = replace(_request(args, args.input, args.config, args.output), graph=graph)
    if args.submit_only:
        return _submit(req, config)
    return _go(req, config, args)


def _submit(req: RunRequest, config: GatewayConfig) -> int:
    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    from batchgate.jobs.workers.submit import submit_job  # noqa: PLC0415 — start-up: only to submit

    job_id, left = asyncio.run(submit_job(req, config, _stderr))
    print(
        f"submitted job {job_id} ({left} tasks to run); start workers with: batchgate worker"
        f"{resume_hint(req.store_path)} --config {req.config_path}"
    )
    return 0


def _progress_mode(args: argparse.Namespace) -> str:
    if args.quiet and args.progress == "auto":
        return "quiet"
    if args.progress == "auto" and observing.logs_on_stderr(args):
        return "lines"  # log lines on stderr would tear the live display
    return str(args.progress)


def _go(req: RunRequest, config: GatewayConfig, args: argparse.Namespace) -> int:
    from batchgate.jobs.job_setup import guard_paths  # noqa: PLC0415 — start-up: only to run
    from batchgate.jobs.progress.counters import make_sink  # noqa: PLC0415 — start-up: only to run
    from batchgate.jobs.runner import run_job  # noqa: PLC0415 — start-up: the engine and HTTP stack only to run

    guard_paths(req)  # before the log file is opened: it must not be a file the run reads
    config = with_cache_options(config, args)
    progress = _progress_mode(args)
    # In JSON-lines mode stdout carries only events; the human lines go to stderr.
    out = _stderr if progress == "json" else print
    sink = make_sink(progress, args.progress_every)
    with observing.logging_for(args), observing.tracing_for(args, config):
        import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

        return asyncio.run(observing.run_observed(req, args, lambda r: run_job(r, config, sink, out=out)))


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


def _import_http_stack() -> None:
    """aiohttp, before anything else imports it: its SSL contexts load their CAs on first use."""
    from batchgate.cli.http_import import import_aiohttp  # noqa: PLC0415 — start-up: only to run

    import_aiohttp()


def _resume(args: argparse.Namespace) -> int:
    _import_http_stack()
    retry_rounds(args)  # a job id right after --retry-failed is the job

    async def find() -> JobRecord:
        store = await open_store(args.store, create=False)
        try:
            return await find_job(store, args.job)
        finally:
            await store.close()

    args.store = choose_location(args.store, load_config(args.config).job.store if args.config else None)
    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    job = asyncio.run(find())
    config_path = args.config or Path(job.config_path)
    config = load_config(config_path)
    if args.errors is None and job.options.errors_path:
        args.errors = Path(job.options.errors_path)
    # The job keeps the choices it was started with unless the user repeats or overrides them.
    args.ordered = args.ordered or job.options.ordered
    args.skip_invalid = args.skip_invalid or job.options.skip_invalid
    # --mode, --deadline, --priority, ...: the job remembers its spec (see job_setup.job_config)
    args.quota_spec = quota_spec(args, config)
    req = _request(args, Path(job.input_path), config_path, Path(job.output_path))
    return _go(req, config, args)


def _plan(args: argparse.Namespace) -> int:
    import orjson  # noqa: PLC0415 — start-up: only `plan` needs it

    from batchgate.clock import wall_time  # noqa: PLC0415 — as above
    from batchgate.embedded import check_embedded  # noqa: PLC0415 — start-up: only `plan` needs it here
    from batchgate.jobs.batch.policy import counted_from, with_job_overrides  # noqa: PLC0415 — as below
    from batchgate.jobs.job_setup import RunRequest, check_input  # noqa: PLC0415 — as above
    from batchgate.jobs.plan import make_plan, render_plan  # noqa: PLC0415 — start-up: only `plan` needs it

    spec = spec_of(mode_fields(args))  # refused as `run` refuses it, naming the flag
    config = counted_from(with_job_overrides(load_config(args.config), spec), wall_time())  # created now
    check_embedded(config)  # the whole config, as `run` checks it
    req = RunRequest(
        input_path=args.input, config_path=args.config, output_path=Path("-"), skip_invalid=args.skip_invalid
    )
    check_input(req, config, _stderr)
    plan = make_plan(config, args.input)
    if args.json:
        print(orjson.dumps(plan, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render_plan(plan))
    return 0
