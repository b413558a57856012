"""`batchgate run`, `batchgate resume` and `batchgate plan`: the user's main job."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from batchgate.config import ROUTE_MODES, GatewayConfig, load_config
from batchgate.errors import JobError
from batchgate.jobs.engine import EngineOptions
from batchgate.jobs.graph.setup import requested_graph
from batchgate.jobs.io.progress import make_sink
from batchgate.jobs.runner import DEFAULT_STORE, RunRequest, check_input, run_job, with_job_overrides


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def _add_mode_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        choices=ROUTE_MODES,
        default=None,
        help="online, batch-api (provider Batch APIs) or auto (by deadline and price); overrides job.mode",
    )
    p.add_argument(
        "--deadline",
        type=_positive_float,
        default=None,
        metavar="HOURS",
        help="results wanted within HOURS of the job's creation; overrides job.deadline_hours",
    )


def _add_run_options(p: argparse.ArgumentParser) -> None:
    _add_mode_options(p)
    p.add_argument("--store", type=Path, default=DEFAULT_STORE, help="job database (default: %(default)s)")
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
    p.add_argument("--concurrency", type=_positive_int, help="override the global concurrency")
    p.add_argument("--max-attempts", type=_positive_int, help="override the attempts per item")
    p.add_argument("--timeout", type=_positive_float, help="override the per-request total timeout (s)")
    p.add_argument(
        "--grace",
        type=_non_negative_float,
        default=10.0,
        help="seconds in-flight work gets on Ctrl-C/SIGTERM (default: %(default)s; a second Ctrl-C cuts it)",
    )
    p.add_argument(
        "--progress",
        choices=("auto", "rich", "json", "quiet"),
        default="auto",
        help="live display (rich), JSON-lines events on stdout, or nothing",
    )
    p.add_argument("-q", "--quiet", action="store_const", const="quiet", dest="progress")


def register(sub: Any) -> None:
    run = sub.add_parser("run", help="run a JSONL batch durably (re-run the same command to resume)")
    run.add_argument("input", type=Path, help="JSONL input (OpenAI Batch, Anthropic batch or plain lines)")
    run.add_argument("--config", type=Path, required=True, help="gateway config (YAML)")
    run.add_argument("--output", type=Path, required=True, help="results (JSONL, OpenAI Batch output shape)")
    run.add_argument("--dry-run", action="store_true", help="print the plan and send nothing")
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
    resume.add_argument("job", help="job id (see `batchgate jobs`)")
    resume.add_argument("--config", type=Path, default=None, help="config (default: the one the job used)")
    _add_run_options(resume)
    resume.set_defaults(handler=_resume)

    plan = sub.add_parser("plan", help="projected tokens, cost and time per provider; sends nothing")
    plan.add_argument("input", type=Path)
    plan.add_argument("--config", type=Path, required=True)
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument("--skip-invalid", action="store_true")
    _add_mode_options(plan)
    plan.set_defaults(handler=_plan)


def _engine_options(args: argparse.Namespace) -> EngineOptions:
    return EngineOptions(
        concurrency=args.concurrency,
        max_attempts=args.max_attempts,
        timeout=args.timeout,
        grace_seconds=args.grace,
    )


def _request(args: argparse.Namespace, input_path: Path, config: Path, output: Path) -> RunRequest:
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
        mode=args.mode,
        deadline_hours=args.deadline,
    )


def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    graph = requested_graph(config, args.fanout, args.pipeline)
    if args.dry_run:
        if graph is not None:
            raise JobError("--dry-run does not plan fan-out or pipeline jobs yet")
        args.json = False
        return _plan(args)
    req = replace(_request(args, args.input, args.config, args.output), graph=graph)
    return _go(req, config, args.progress)


def _go(req: RunRequest, config: GatewayConfig, progress: str) -> int:
    # In JSON-lines mode stdout carries only events; the human lines go to stderr.
    out = _stderr if progress == "json" else print
    return asyncio.run(run_job(req, config, make_sink(progress), out=out))


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


def _resume(args: argparse.Namespace) -> int:
    from batchgate.jobs.store.sqlite import SqliteJobStore  # noqa: PLC0415 — start-up: only `resume` needs it

    async def find() -> Any:
        store = await SqliteJobStore.open(args.store)
        try:
            return await store.get_job(args.job)
        finally:
            await store.close()

    if not Path(args.store).exists():
        raise JobError(f"no job store at {args.store} (pass --store)")
    job = asyncio.run(find())
    if job is None:
        raise JobError(f"no job {args.job!r} in {args.store} (see `batchgate jobs`)")
    config_path = args.config or Path(job.config_path)
    config = load_config(config_path)
    if args.errors is None and job.options.get("errors_path"):
        args.errors = Path(job.options["errors_path"])
    # The job keeps the choices it was started with unless the user repeats or overrides them.
    if not args.ordered and job.options.get("ordered"):
        args.ordered = True
    if not args.skip_invalid and job.options.get("skip_invalid"):
        args.skip_invalid = True
    # --mode and --deadline: the job remembers them (see runner.job_config)
    req = _request(args, Path(job.input_path), config_path, Path(job.output_path))
    return _go(req, config, args.progress)


def _plan(args: argparse.Namespace) -> int:
    from batchgate.jobs.plan import make_plan, render_plan  # noqa: PLC0415 — start-up: only `plan` needs it

    config = with_job_overrides(load_config(args.config), args.mode, args.deadline)
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
