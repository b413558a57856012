"""`batchgate worker`: take chunks of submitted jobs' tasks from a shared store and run them
(see `batchgate.jobs.workers`). Jobs are submitted with `batchgate run ... --submit-only`.

Registering the parser imports nothing heavy; the handler imports the worker, the gateway and the
store."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from batchgate.cli.arg_types import positive_float, positive_int
from batchgate.cli.config_file import load_config
from batchgate.cli.quota_option import add_quota_option, quota_spec
from batchgate.jobs.store.location import describe, open_store, parse_location

if TYPE_CHECKING:
    from batchgate.config import GatewayConfig
    from batchgate.jobs.workers.loop import Worker, WorkerOptions, WorkerTotals


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    w = sub.add_parser(
        "worker",
        help="run submitted jobs' tasks in chunks under a lease (any number of workers, any machines)",
    )
    w.add_argument(
        "--store", type=parse_location, required=True, help="the shared job store (a postgresql:// URL)"
    )
    add_quota_option(w)
    w.add_argument(
        "--config",
        type=Path,
        required=True,
        help="gateway config (YAML): providers, routes, quotas; the same on every worker",
    )
    w.add_argument(
        "--chunk-size", type=positive_int, default=50, help="tasks per lease (default: %(default)s)"
    )
    w.add_argument(
        "--lease", type=positive_float, default=30.0, metavar="S", help="lease length (default: %(default)s)"
    )
    w.add_argument(
        "--lanes", type=positive_int, default=4, help="chunks in flight at once (default: %(default)s)"
    )
    w.add_argument("--concurrency", type=positive_int, help="override the global concurrency")
    w.add_argument(
        "--idle-max",
        type=positive_float,
        default=2.0,
        metavar="S",
        help="longest wait between polls of the store when no task is claimable (default: %(default)s)",
    )
    w.add_argument(
        "--exit-when-idle",
        action="store_true",
        help="exit once no submitted job has a task pending or running (default: wait for more)",
    )
    w.set_defaults(handler=_worker)


def _worker(args: argparse.Namespace) -> int:
    from batchgate.jobs.workers.loop import WorkerOptions  # noqa: PLC0415 — start-up: only to run

    config = load_config(args.config)
    options = WorkerOptions(
        chunk_size=args.chunk_size,
        lease_seconds=args.lease,
        lanes=args.lanes,
        exit_when_idle=args.exit_when_idle,
        idle_max_s=args.idle_max,
        concurrency=args.concurrency,
        quota_store=quota_spec(args, config),
    )
    print(f"worker {options.owner}: taking submitted jobs from {describe(args.store)}", file=sys.stderr)
    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    totals = asyncio.run(_serve(args, config, options))
    finished = f"; wrote the output of {', '.join(totals.finished)}" if totals.finished else ""
    print(
        f"worker {options.owner}: {totals.chunks} chunks, {totals.committed} results committed, "
        f"{totals.lost} leases lost{finished}",
        file=sys.stderr,
    )
    return 0


async def _serve(args: argparse.Namespace, config: GatewayConfig, options: WorkerOptions) -> WorkerTotals:
    from batchgate.jobs.workers.loop import Worker  # noqa: PLC0415 — start-up: only to run

    store = await open_store(args.store, create=True)
    try:
        worker = Worker(config, store, options)
        with _signals(worker):
            return await worker.run()
    finally:
        await store.close()


class _signals:
    """SIGINT/SIGTERM: the worker claims nothing more, finishes what it sent and commits it."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._sigs = (
            (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
        )

    def __enter__(self) -> None:
        import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

        loop = asyncio.get_running_loop()
        for sig in self._sigs:
            loop.add_signal_handler(sig, self._worker.stop)

    def __exit__(self, *exc: object) -> None:
        import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

        loop = asyncio.get_running_loop()
        for sig in self._sigs:
            loop.remove_signal_handler(sig)
