"""What OpenTelemetry tracing costs per request, off and on side by side in one run.

    python bench/tracing_overhead.py [--requests 4000] [--rounds 5] [--window 32]

One gateway (in this process) sends short requests to an emulator that answers at once and never
limits (a child process), `--window` at a time; the rounds alternate tracing off and on (spans
exported by OTLP/HTTP to a receiver in a child process, which reads and drops them), so drift hits
both alike. Each round counts two CPU figures per request:

- loop: the CPU of the thread running the event loop (`time.thread_time`) — what a request's
  span costs where requests are sent;
- process: the CPU of the whole process (`time.process_time`), the exporter's thread included —
  its protobuf encoding and HTTP posts. A round's end flushes the exporter, so its spans are paid
  for in the round that made them.

A third way, `built`, makes the same spans and hands them to an exporter that drops them (no
encoding, no export thread): what building the spans alone costs. Prints the median per request
of each way and the differences from off (the tracing's cost).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import yaml
from aiohttp import web
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from batchgate.config import config_from_dict
from batchgate.emulator import EmulatorProcess
from batchgate.gateway import Gateway

EMULATOR = {
    "seed": 1,
    "providers": [
        {
            "name": "alpha",
            "family": "openai",
            "limits": {"rpm": 10**9, "tpm": 10**12},
            "latency": {"ttft_p50_ms": 0, "per_token_ms": 0},
        }
    ],
}


def _sink(port: multiprocessing.Queue[int]) -> None:  # type: ignore[type-arg]
    """An OTLP/HTTP endpoint that reads each export and drops it (its CPU is not ours)."""

    async def traces(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b"", content_type="application/x-protobuf")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/traces", traces)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port.put(runner.addresses[0][1])
        await asyncio_forever()

    import asyncio  # noqa: PLC0415 — the child's own loop

    async def asyncio_forever() -> None:
        await asyncio.Event().wait()

    asyncio.run(main())


def _medians(rows: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)


def _body(i: int) -> dict[str, object]:
    return {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": f"note {i}"}]}


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def one_round(config: object, n: int, window: int, way: str) -> tuple[float, float]:
    """(loop CPU ms, process CPU ms) per request for one round of `n` requests."""
    from batchgate.observe.tracing.setup import tracing_on  # noqa: PLC0415 — the otel extra

    loop0, proc0 = time.thread_time(), time.process_time()
    if way != "off":
        with tracing_on(config, exporter=_Drop() if way == "built" else None):  # type: ignore[arg-type]
            await _send(config, n, window)
            loop1 = time.thread_time()
        # the block's end flushed the exporter: its encoding counts in process CPU, not the loop's
    else:
        await _send(config, n, window)
        loop1 = time.thread_time()
    proc1 = time.process_time()
    return 1000.0 * (loop1 - loop0) / n, 1000.0 * (proc1 - proc0) / n


async def _send(config: object, n: int, window: int) -> None:
    async with Gateway(config) as gw:  # type: ignore[arg-type]
        done = 0
        async for result in gw.stream((_body(i) for i in range(n)), window=window):
            if not result.ok:
                raise SystemExit(f"a request failed: {result.error}")
            done += 1
    assert done == n


def main(argv: list[str] | None = None) -> int:
    import asyncio  # noqa: PLC0415 — not at import

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=int, default=32)
    args = parser.parse_args(argv)
    ports: multiprocessing.Queue[int] = multiprocessing.Queue()  # type: ignore[type-arg]
    sink = multiprocessing.Process(target=_sink, args=(ports,), daemon=True)
    sink.start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{ports.get(timeout=30)}"
    figures: dict[str, list[tuple[float, float]]] = {"off": [], "built": [], "on": []}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-tracing-") as tmp:
            emu_yaml = Path(tmp) / "emulator.yaml"
            emu_yaml.write_text(yaml.safe_dump(EMULATOR))
            with EmulatorProcess(emu_yaml) as emu:
                provider = {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")}
                data = {"providers": [provider], "routes": [{"model": "m", "targets": ["alpha"]}]}
                config = config_from_dict(data, environ={})
                asyncio.run(one_round(config, args.requests // 4, args.window, "on"))  # warm-up
                for _ in range(args.rounds):
                    for way, runs in figures.items():
                        runs.append(asyncio.run(one_round(config, args.requests, args.window, way)))
    finally:
        sink.kill()
    print(f"{args.requests:,} requests a round, window {args.window}, median of {args.rounds} rounds:")
    med = {w: _medians(f) for w, f in figures.items()}
    names = {"off": "tracing off", "built": "spans built, dropped", "on": "tracing on (OTLP)"}
    for way, (loop, proc) in med.items():
        print(f"  {names[way]:22s} loop CPU {loop:.4f} ms/req   process CPU {proc:.4f} ms/req")
    print("  differences from off, each round against the off round just before it (median):")
    for way in ("built", "on"):
        pairs = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(figures[way], figures["off"], strict=True)]
        loop, proc = _medians(pairs)
        print(f"  {way + ' - off':22s} loop CPU {loop:+.4f} ms/req   process CPU {proc:+.4f} ms/req")
    return 0


if __name__ == "__main__":
    sys.exit(main())
