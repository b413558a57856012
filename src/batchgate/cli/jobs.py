"""`batchgate jobs`, `batchgate status [JOB]` and `batchgate report JOB`: looking at jobs from any
terminal, while they run or after they stopped (the store is read, never written)."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from batchgate.cli.config_file import load_config
from batchgate.errors import JobError, JobLockedError
from batchgate.jobs.store.find import api_id, find_job
from batchgate.jobs.store.location import (
    DEFAULT_STORE,
    StoreLocation,
    choose_location,
    open_store,
    parse_location,
)
from batchgate.jobs.store.protocol import JobRecord, JobStore, TaskState

if TYPE_CHECKING:
    from batchgate.config.job_spec import ShownSpec
    from batchgate.jobs.finish import JobReport
    from batchgate.jobs.progress.shapes import Snapshot

    class StatusView(ShownSpec):
        """`batchgate status --json`: the job, its spec as shown, its counts, a running job's figures."""

        job: str
        api_id: str | None
        state: str
        stop_reason: str | None
        input: str
        output: str
        total: int
        succeeded: int
        failed: int
        pending: int
        live: Snapshot | None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    jobs = sub.add_parser("jobs", help="list the jobs in the store")
    store_options(jobs)
    jobs.set_defaults(handler=_jobs)
    status = sub.add_parser("status", help="show a running or stopped job (default: the latest)")
    status.add_argument("job", nargs="?", help="job id or a unique prefix (default: the latest job)")
    store_options(status)
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_status)
    report = sub.add_parser("report", help="print a job's JSON report (default: the latest job)")
    report.add_argument("job", nargs="?", help="job id or a unique prefix (default: the latest job)")
    store_options(report)
    report.add_argument("--summary", action="store_true", help="print the readable table instead of JSON")
    report.add_argument("-o", "--output", type=Path, default=None, help="write it to this file instead")
    report.add_argument(
        "--html", type=Path, default=None, metavar="OUT.html",
        help="write one self-contained page with the job's charts (no server needed)",
    )  # fmt: skip
    report.set_defaults(handler=_report)


def store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        type=parse_location,
        default=None,
        help=f"job store: a SQLite file or a postgresql:// URL (default: --config's job.store, "
        f"else {DEFAULT_STORE})",
    )
    p.add_argument(
        "--config", type=Path, default=None, help="the config whose job.store to read, as `run` does"
    )


def store_of(args: argparse.Namespace) -> StoreLocation:
    """`--store`, else the `job.store` of `--config`, else the default file (as `run` chooses)."""
    if args.store is None:
        configured = load_config(args.config).job.store if args.config is not None else None
        args.store = choose_location(None, configured)
    location: StoreLocation = args.store
    return location


async def _open(args: argparse.Namespace) -> JobStore:
    return await open_store(store_of(args), create=False)


def _running(store: JobStore, job_id: str) -> bool:
    try:
        with store.lock_job(job_id):
            return False
    except JobLockedError:
        return True


def _state(store: JobStore, job: JobRecord) -> str:
    """running (a process holds the lock), interrupted (recorded running, nobody holds it), or stored.
    A job submitted for workers (`run --submit-only`) is never held by one process: it is
    "submitted" until a worker takes it, then "with workers" until one finishes it."""
    if _running(store, job.job_id):
        return "running"
    if job.options.workers and job.status in ("created", "running"):
        return "submitted" if job.status == "created" else "with workers"
    return "interrupted" if job.status == "running" else job.status


def _jobs(args: argparse.Namespace) -> int:
    async def go() -> None:
        store = await _open(args)
        try:
            jobs = await store.list_jobs()
            if not jobs:
                print("no jobs")
            for job in jobs:
                counts = await store.counts(job.job_id)
                state = _state(store, job)
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(job.updated_at))
                served = f" ({api_id(job)})" if api_id(job) else ""  # a server's id for it
                served += _spec_line(job.options.spec.shown())  # its name, priority, metadata
                print(
                    f"{job.job_id}{served}  {state:<11} {counts[TaskState.SUCCEEDED]:>8} ok "
                    f"{counts[TaskState.FAILED]:>6} "
                    f"failed {counts[TaskState.PENDING] + counts[TaskState.RUNNING]:>8} left  {when}  "
                    f"{job.input_path} -> {job.output_path}"
                )
        finally:
            await store.close()

    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    asyncio.run(go())
    return 0


def _status(args: argparse.Namespace) -> int:
    from batchgate.jobs.progress.counters import LIVE_BLOB  # noqa: PLC0415 — start-up: not for `--help`
    from batchgate.jobs.progress.shapes import load_snapshot  # noqa: PLC0415 — start-up: not for `--help`

    async def go() -> StatusView:
        store = await _open(args)
        try:
            job = await find_job(store, args.job)
            counts = await store.counts(job.job_id)
            live = await store.get_blob(job.job_id, LIVE_BLOB)
            state = _state(store, job)
            return {
                "job": job.job_id,
                "api_id": api_id(job),
                **job.options.spec.shown(),  # name, priority, metadata, schedule, callback host
                "state": state,
                "stop_reason": job.stop_reason,
                "input": job.input_path,
                "output": job.output_path,
                "total": job.task_total,
                "succeeded": counts[TaskState.SUCCEEDED],
                "failed": counts[TaskState.FAILED],
                "pending": counts[TaskState.PENDING] + counts[TaskState.RUNNING],
                "live": load_snapshot(live) if live and state == "running" else None,
            }
        finally:
            await store.close()

    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    info = asyncio.run(go())
    if args.json:
        print(orjson.dumps(info, option=orjson.OPT_INDENT_2).decode())
        return 0
    served, reason = (f" ({info[k]})" if info[k] else "" for k in ("api_id", "stop_reason"))
    print(f"job {info['job']}{served}{_spec_line(info)}: {info['state']}{reason}")
    if info["not_before"] and info["state"] in ("created", "running"):
        print(f"  starts no earlier than {info['not_before']}")
    print(
        f"  {info['succeeded']} succeeded, {info['failed']} failed, "
        f"{info['pending']} pending of {info['total']}"
    )
    if info["live"]:
        _print_live(info["live"])
    if info["state"] in ("stopped", "interrupted"):
        print(f"  resume with: batchgate resume {info['job']}")
    return 0


def _print_live(live: Snapshot) -> None:
    """A running job's figures: rate, ETA, 429s, in flight, cost; its batches; each provider."""
    print(
        f"  {live['rate_per_s']}/s, {_eta(live)}, {live['rate_limited']} x 429, "
        f"{live['in_flight']} in flight, ${live['cost_usd']:.4f}"
    )
    batches = live.get("batches")
    if batches:
        states = ", ".join(f"{k} {v}" for k, v in sorted(batches["by_state"].items())) or "none open"
        print(
            f"  batches: {batches['open']} open ({states}), {batches['processed']} of "
            f"{batches['items']} items processed; {batches['submitted']} submitted, "
            f"{batches['resumed']} resumed"
        )
    for name, p in sorted(live["providers"].items()):
        print(
            f"    {name}: {p['requests']} requests, {p['ok']} ok, {p['errors']} errors, "
            f"{p['rate_limited']} x 429, {p['in_flight']} in flight"
        )


def _report(args: argparse.Namespace) -> int:
    from batchgate.jobs.finish import stored_report, write_report  # noqa: PLC0415 — start-up: not for `--help`
    from batchgate.jobs.output.same_file import check_output_writable  # noqa: PLC0415 — start-up: not for `--help`
    from batchgate.jobs.report.shapes import report_json  # noqa: PLC0415 — start-up: not for `--help`
    from batchgate.jobs.report.summary import render_summary  # noqa: PLC0415 — start-up: not for `--help`

    if args.html is not None:
        return _report_html(args)

    async def go() -> JobReport:
        store = await _open(args)
        try:
            job = await find_job(store, args.job)
            if args.output is not None:
                guard_report(args.output, "report", job, args.store)
            report = await stored_report(store, job)
            report["state"] = _state(store, job)
            return report
        finally:
            await store.close()

    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    report = asyncio.run(go())
    if args.output is None:
        print(render_summary(report) if args.summary else report_json(report).decode())
    elif args.summary:
        check_output_writable(args.output)
        write_text(args.output, render_summary(report) + "\n")
    else:
        check_output_writable(args.output)
        write_report(args.output, report)
    return 0


def guard_report(path: Path, what: str, job: JobRecord, store: StoreLocation) -> None:
    """Refuse a report path that is a file of the job: its input, config, output, errors file,
    the store, or (for a page) its JSON report — the same inode, whatever the path says."""
    from batchgate.jobs.output.same_file import refuse_overwrite  # noqa: PLC0415 — start-up: not for `--help`

    output = Path(job.output_path)
    errors = job.options.errors_path
    reads = {
        "job's input": Path(job.input_path),
        "job's config": Path(job.config_path),
        "job's output": output,
        "job's errors file": Path(errors) if isinstance(errors, str) else None,
        "job's report": output.with_name(output.name + ".report.json") if what == "page" else None,
        "job store": store if isinstance(store, Path) else None,
    }
    refuse_overwrite({what: path}, reads)


def write_text(path: Path, text: str) -> None:
    """Write `text` atomically, owner-only (0600) like every other artefact."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise JobError(f"{path}: cannot write the report ({exc.strerror})") from None


def _report_html(args: argparse.Namespace) -> int:
    """`report --html OUT.html`: the job page's charts and figures in one file, written atomically."""
    from batchgate.web.report_page import write_report_page  # noqa: PLC0415 — start-up: not for `--help`

    async def go() -> None:
        store = await _open(args)
        try:
            job = await find_job(store, args.job)
            guard_report(args.html, "page", job, args.store)
            await write_report_page(store, job, _state(store, job), args.html)
        finally:
            await store.close()

    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    asyncio.run(go())
    print(f"wrote {args.html}")
    return 0


def _spec_line(shown: Mapping[str, object]) -> str:
    from batchgate.config.job_spec import spec_line  # noqa: PLC0415 — start-up: not for `--help`

    return spec_line(shown)


def _eta(live: Snapshot) -> str:
    """`ETA 42.0 s`, or `stalled for 45.0 s` when nothing has ended for a while."""
    stalled = live.get("stalled_s")
    return f"stalled for {stalled} s" if stalled is not None else f"ETA {live.get('eta_s')} s"
