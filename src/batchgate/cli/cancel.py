"""`batchgate cancel JOB`: stop a job, cancel its provider batches and keep its partial results."""

from __future__ import annotations

import argparse
import sys

from batchgate.cli.jobs import store_of, store_options
from batchgate.jobs.store.location import resume_hint


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cancel = sub.add_parser(
        "cancel",
        help="stop a job (running or not), cancel its provider batches, keep partial results",
    )
    cancel.add_argument("job", help="job id or a unique prefix (see `batchgate jobs`)")
    store_options(cancel)  # --store, else --config's job.store, as `status` and `report` find it
    cancel.add_argument(
        "--wait",
        type=float,
        default=180.0,
        metavar="S",
        help="how long to wait for a running job to stop (default: %(default)s)",
    )
    cancel.set_defaults(handler=_cancel)


def _cancel(args: argparse.Namespace) -> int:
    from batchgate.jobs.cancel import cancel_job  # noqa: PLC0415 — start-up: loaded only when this subcommand runs
    from batchgate.jobs.report.summary import render_summary  # noqa: PLC0415 — start-up: as above

    def say(text: str) -> None:
        print(text, file=sys.stderr)

    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    store = store_of(args)
    result = asyncio.run(cancel_job(store, args.job, wait_s=args.wait, say=say))
    done = result.finished
    say(render_summary(done.report))
    batches = f"; cancelled {result.batches_cancelled} batches" if result.batches_cancelled else ""
    store_hint = resume_hint(store)
    print(
        f"job {result.job_id}: {done.status}"
        + (f" ({done.reason})" if done.reason else "")
        + f"; {done.written} results kept, {done.unfinished} tasks left{batches}"
        + (f"; resume with: batchgate resume {result.job_id}{store_hint}" if done.unfinished else "")
    )
    return 0
