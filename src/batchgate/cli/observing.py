"""The options that let a run be watched from outside — `--log-format`, `--log-level`,
`--log-file` (structured log events) and `--metrics-port`, `--metrics-host`, `--metrics-linger`
(Prometheus `/metrics` during the run), `--trace` (OpenTelemetry spans by OTLP, as the
`OTEL_EXPORTER_OTLP_*` variables say; the config's `tracing:` too) — and running a job under them.

Logging is off unless one of the `--log-*` options is given; then events go to the file, else to
stderr (where `--progress auto` then prints progress lines instead of the live display, which
would be torn by them). Registering the options imports nothing heavy; the metrics'
`prometheus_client` and aiohttp's web server load only for a run that asks for `--metrics-port`,
OpenTelemetry only for one that traces.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from batchgate.cli.arg_types import non_negative_float
from batchgate.errors import JobError
from batchgate.observe.logsetup import FORMATS, LEVELS, logging_to

if TYPE_CHECKING:
    from batchgate.config import GatewayConfig
    from batchgate.jobs.engine import JobEngine
    from batchgate.jobs.job_setup import RunRequest


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be a TCP port (0-65535; 0 picks a free one)")
    return value


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--log-format",
        choices=FORMATS,
        default=None,
        help="log events as text lines or one JSON object per line (turns logging on; default text)",
    )
    p.add_argument(
        "--log-level",
        choices=LEVELS,
        default=None,
        help="least severe event logged (turns logging on; default info)",
    )
    p.add_argument(
        "--log-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="append log events to PATH (turns logging on; default: stderr when logging is on)",
    )
    p.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics while the run lasts (0: any free port)",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address /metrics listens on (default: %(default)s)",
    )
    p.add_argument(
        "--metrics-linger",
        type=non_negative_float,
        default=0.0,
        metavar="S",
        help="keep /metrics up S seconds after the run, for a last scrape (Ctrl-C ends it early)",
    )
    add_trace_option(p)


def add_trace_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace",
        action="store_true",
        help="export OpenTelemetry traces by OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT (default "
        "http://localhost:4318; the otel extra; as the config's tracing: true)",
    )


@contextlib.contextmanager
def tracing_for(args: argparse.Namespace, config: GatewayConfig) -> Iterator[None]:
    """Spans of requests, jobs and batches exported while the block runs, when `--trace` or the
    config's `tracing:` asks for them; flushed at its end."""
    if not (getattr(args, "trace", False) or config.tracing.enabled):
        yield
        return
    try:
        from batchgate.observe.tracing.setup import tracing_on  # noqa: PLC0415 — optional extra `otel`
    except ImportError as exc:
        raise JobError(f"tracing needs {exc.name}: pip install 'batchgate[otel]'") from None
    with tracing_on(config) as tracer:
        yield
    if tracer.unexported:
        said = f"batchgate: {tracer.unexported} spans could not be exported (is the OTLP collector up?"
        print(f"{said} OTEL_EXPORTER_OTLP_ENDPOINT)", file=sys.stderr)


def logging_on(args: argparse.Namespace) -> bool:
    return any(getattr(args, k, None) is not None for k in ("log_format", "log_level", "log_file"))


def logs_on_stderr(args: argparse.Namespace) -> bool:
    """Whether log events share stderr with the display (then `auto` progress prints lines)."""
    return logging_on(args) and args.log_file is None


@contextlib.contextmanager
def logging_for(args: argparse.Namespace) -> Iterator[None]:
    """The run's log handler, as its options ask (nothing when logging is off)."""
    if not logging_on(args):
        yield
        return
    with logging_to(args.log_level or "info", args.log_format or "text", args.log_file):
        yield


async def run_observed(
    req: RunRequest, args: argparse.Namespace, run: Callable[[RunRequest], Awaitable[int]]
) -> int:
    """`run(req)`, serving `/metrics` for its job meanwhile when `--metrics-port` asks for it."""
    if args.metrics_port is None:
        return await run(req)
    try:
        from batchgate.observe.exporter import linger, serving  # noqa: PLC0415 — optional extra `metrics`
        from batchgate.observe.metrics import engine_view  # noqa: PLC0415 — as above
    except ImportError as exc:
        raise JobError(f"--metrics-port needs {exc.name}: pip install 'batchgate[metrics]'") from None

    engines: list[JobEngine] = []
    req = replace(req, on_engine=engines.append)
    async with serving(
        lambda: [engine_view(e) for e in engines[-1:]], args.metrics_host, args.metrics_port
    ) as srv:
        print(f"batchgate: metrics at {srv.url}", file=sys.stderr)
        code = await run(req)
        if args.metrics_linger > 0:
            said = f"batchgate: the run ended; {srv.url} stays up {args.metrics_linger:g} s (Ctrl-C ends it)"
            await linger(args.metrics_linger, lambda: print(said, file=sys.stderr))
    return code
