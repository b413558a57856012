"""How many requests per second the emulator serves at zero latency.

Starts the emulator in its own process (`python -m batchgate emulate`), loads it from this process
with an aiohttp client (keep-alive, `--concurrency` requests in flight, a distinct prompt per
request so no cache flatters the figure) for `--seconds`, then prints the client's req/s, the
emulator's CPU time (from /proc) and so its requests per CPU-second — the one-core figure, robust to
a busy machine — and what the emulator says it admitted.

    python bench/emulator_throughput.py --seconds 10 --concurrency 64 [--family anthropic]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from batchgate.emulator import EmulatorProcess

CONFIG = """\
seed: 1
providers:
  - name: fast
    family: {family}
    limits: {{rpm: 100000000, tpm: 1000000000000}}
"""
PROMPT = "Classify the sentiment of this review: I loved it, a great film (#{})"


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process, or None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_body(family: str, i: int) -> bytes:
    body: dict[str, object] = {"model": "bench", "messages": [{"role": "user", "content": PROMPT.format(i)}]}
    if family == "anthropic":
        body["max_tokens"] = 16
    return orjson.dumps(body)


async def load(url: str, family: str, headers: dict[str, str], seconds: float, concurrency: int) -> int:
    """Requests answered 200 within `seconds`, with `concurrency` workers."""
    ok = errors = 0
    sequence = iter(range(1 << 62))
    deadline = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def worker() -> None:
            nonlocal ok, errors
            while time.perf_counter() < deadline:
                async with session.post(url, data=make_body(family, next(sequence))) as response:
                    await response.read()
                    if response.status == 200:
                        ok += 1
                    else:
                        errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    if errors:
        print(f"warning: {errors} non-200 answers", file=sys.stderr)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description="Requests per second the emulator serves at zero latency.")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--family", choices=("openai", "anthropic"), default="openai")
    args = parser.parse_args()

    headers = {"Content-Type": "application/json"}
    if args.family == "openai":
        headers["Authorization"] = "Bearer x"
    else:
        headers.update({"x-api-key": "x", "anthropic-version": "2023-06-01"})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "emulator.yaml"
        path.write_text(CONFIG.format(family=args.family), encoding="utf-8")
        with EmulatorProcess(path) as emulator:
            suffix = "/chat/completions" if args.family == "openai" else "/v1/messages"
            url = emulator.base_url("fast") + suffix
            asyncio.run(load(url, args.family, headers, 1.0, args.concurrency))  # warm up
            emulator.reset()
            cpu_before = cpu_seconds(emulator.pid)
            started = time.perf_counter()
            ok = asyncio.run(load(url, args.family, headers, args.seconds, args.concurrency))
            elapsed = time.perf_counter() - started
            cpu_after = cpu_seconds(emulator.pid)
            admitted = emulator.stats()["providers"]["fast"]["admitted"]

    print(f"family={args.family} concurrency={args.concurrency} seconds={elapsed:.1f}")
    print(f"answered={ok} emulator_admitted={admitted}")
    print(f"throughput={ok / elapsed:.0f} req/s (wall clock)")
    if cpu_before is not None and cpu_after is not None and cpu_after > cpu_before:
        cpu = cpu_after - cpu_before
        print(f"emulator_cpu={cpu:.2f}s ({cpu / elapsed:.0%} of one core)")
        print(f"per_core={admitted / cpu:.0f} req per emulator CPU-second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
