"""Live requests through `batchgate serve`'s proxy while a batch saturates the same provider.

    python bench/serve_live_proxy.py [--lines 1500] [--rpm 600] [--latency-ms 200] [--live-rps 1]

One emulated provider limited to `--rpm` (enforced over 1 s); one `batchgate serve` (a subprocess)
runs a batch of `--lines` requests on it, and — once the batch is sending — a live client sends
`--live-rps` chat completions a second through `/v1/chat/completions` until the batch ends. Run
twice side by side: the batch alone, then the batch with the live client.

Prints, for the live requests, their quota wait — from arrival at the server to being sent, as the
server reports it in `x-batchgate-queue-ms` — and their latency seen by the client (p50, p95, max);
for the provider: requests, quota 429s per request, and pace — the quota's minimum seconds for
the requests that succeeded (batch and live) ÷ the seconds from its first request to the admission
of the last one that succeeded (1.0 = the quota used fully) — and the batch's own makespan.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from openai import OpenAI
from serve_bench import MODEL, emulator, served, write_config

from batchgate.emulator import EmulatorThread

ENDED = ("completed", "failed", "cancelled", "expired")


def _input(n: int) -> bytes:
    lines = []
    for i in range(n):
        body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": f"batch {i}"}]}
        lines.append({"custom_id": f"b-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


class LiveClient(threading.Thread):
    """Sends one live request every 1/rps seconds until stopped; records the waits and latencies."""

    def __init__(self, client: OpenAI, rps: float) -> None:
        super().__init__(daemon=True)
        self.client, self.period = client, 1.0 / rps
        self.stop = threading.Event()
        self.waits_ms: list[float] = []
        self.latencies_ms: list[float] = []
        self.failed = 0

    def run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                raw = self.client.chat.completions.with_raw_response.create(
                    model=MODEL, max_tokens=5, messages=[{"role": "user", "content": f"live {n}"}]
                )
                raw.parse()
                self.latencies_ms.append((time.monotonic() - started) * 1000.0)
                self.waits_ms.append(float(raw.headers["x-batchgate-queue-ms"]))
            except Exception:  # a failed live request is counted, the bench goes on
                self.failed += 1
            n += 1
            next_at += self.period
            self.stop.wait(max(0.0, next_at - time.monotonic()))


def _provider(emu: EmulatorThread, rpm: int) -> dict[str, Any]:
    p = emu.stats()["providers"]["alpha"]
    r429 = int(p["rejected"].get("rate_limit", 0)) + int(p["rejected"].get("concurrency", 0))
    requests = int(p["admitted"]) + r429
    first, last = p["first_request_s"], p["last_success_admitted_s"]
    span = (last - first) if first is not None and last is not None else None
    bound = int(p["completed"]) / (rpm / 60.0)
    pace = bound / span if span else None
    return {"requests": requests, "r429": r429 / requests if requests else 0.0, "pace": pace}


def run(root: Path, emu: EmulatorThread, args: argparse.Namespace, live: bool) -> dict[str, Any]:
    config = write_config(root / "gw.yaml", emu, args.rpm, concurrency=256)
    with served(root, config) as server:
        client = OpenAI(base_url=server.url + "/v1", api_key=server.key, max_retries=0, timeout=120)
        f = client.files.create(file=("in.jsonl", _input(args.lines)), purpose="batch")
        started = time.monotonic()
        batch = client.batches.create(
            input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        while emu.stats()["providers"]["alpha"]["admitted"] < min(args.rpm // 6, args.lines // 4):  # ~10 s in
            time.sleep(0.2)
        sender = LiveClient(client, args.live_rps)
        if live:
            sender.start()
        while (status := client.batches.retrieve(batch.id).status) not in ENDED:
            time.sleep(0.5)
        makespan = time.monotonic() - started
        sender.stop.set()
        if live:
            sender.join(timeout=130)
    return {"status": status, "makespan": makespan, "live": sender, **_provider(emu, args.rpm)}


def _quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"p50 {statistics.median(ordered):7.1f}  p95 {p95:7.1f}  max {ordered[-1]:7.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1500, help="requests in the batch")
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--live-rps", type=float, default=1.0)
    args = parser.parse_args()
    print(f"batch of {args.lines} on one provider (rpm {args.rpm}, {args.latency_ms:.0f} ms); "
          f"live client {args.live_rps:g}/s through the proxy")  # fmt: skip
    print(f"{'setup':<22} {'batch':>9} {'makespan':>9} {'requests':>8} {'429/req':>8} {'pace':>6}")
    for name, live in (("batch alone", False), ("batch + live client", True)):
        emu = emulator(args.rpm, args.latency_ms)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                f = run(Path(tmp), emu, args, live)
        finally:
            emu.stop()
        pace = f"{f['pace']:.3f}" if f["pace"] is not None else "-"
        figures = f"{f['makespan']:>8.1f}s {f['requests']:>8} {f['r429']:>8.2%} {pace:>6}"
        print(f"{name:<22} {f['status']:>9} {figures}")
        sender: LiveClient = f["live"]
        if live:
            print(f"  live requests: {len(sender.waits_ms)} answered, {sender.failed} failed")
            print(f"  quota wait (ms, server):    {_quantiles(sender.waits_ms)}")
            print(f"  latency (ms, client):       {_quantiles(sender.latencies_ms)}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
