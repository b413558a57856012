"""Priorities in `batchgate serve`: three equal jobs (high, normal, low) started together (one
`not_before`) on one quota-constrained provider, sharing the server's gateway.

    python bench/serve_priorities.py [--lines 300] [--rpm 1200] [--latency-ms 100]

Polls each job's detail (`GET /v1/jobs/{id}`) and prints when each finished and each job's share
of the answers while all three ran (from the start to high's end) against its weight's share
(6/3/1 → 60/30/10 %). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from serve_bench import MODEL, emulator, served, write_config

from batchgate.emulator import EmulatorThread

PRIORITIES = ("high", "normal", "low")
WEIGHTS = {"high": 0.6, "normal": 0.3, "low": 0.1}
START_IN_S = 2.0


def _requests(job: str, n: int) -> list[dict[str, Any]]:
    lines = []
    for i in range(n):
        body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": f"{job} {i}"}]}
        lines.append(
            {"custom_id": f"{job}-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
        )
    return lines


def _watch(http: httpx.Client, ids: dict[str, str], t0: float) -> list[tuple[float, dict[str, int]]]:
    """(seconds since the start, succeeded per job) until every job ended."""
    samples: list[tuple[float, dict[str, int]]] = []
    while True:
        jobs = {p: http.get(f"/jobs/{job_id}").json() for p, job_id in ids.items()}
        samples.append((time.time() - t0, {p: j["progress"]["succeeded"] for p, j in jobs.items()}))
        if all(j["state"] in ("completed", "failed", "cancelled") for j in jobs.values()):
            return samples
        time.sleep(0.1)


def run(root: Path, emu: EmulatorThread, n: int, rpm: int) -> list[tuple[float, dict[str, int]]]:
    with served(root, write_config(root / "gw.yaml", emu, rpm, concurrency=64)) as server:
        headers = {"Authorization": f"Bearer {server.key}"}
        with httpx.Client(base_url=server.url + "/v1", headers=headers, timeout=30) as http:
            at = time.time() + START_IN_S
            ids = {}
            for p in PRIORITIES[::-1]:  # low first
                body = {"requests": _requests(p, n), "priority": p, "not_before": at}
                made = http.post("/jobs", json=body)
                assert made.status_code == 201, made.text
                ids[p] = made.json()["id"]
            return _watch(http, ids, at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300, help="lines per job")
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    args = parser.parse_args()
    emu = emulator(args.rpm, args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            samples = run(Path(tmp), emu, args.lines, args.rpm)
    finally:
        emu.stop()
    ends = {p: next(t for t, done in samples if done[p] == args.lines) for p in PRIORITIES}
    during = next(done for t, done in samples if t >= ends["high"])
    total = sum(during.values())
    print(f"three jobs x {args.lines} lines on one provider (rpm {args.rpm}, {args.latency_ms:.0f} ms)")
    print(f"{'job':<8} {'finished s':>10} {'share while all ran':>20} {'weight':>7}")
    for p in PRIORITIES:
        print(f"{p:<8} {ends[p]:>10.1f} {during[p] / total:>20.1%} {WEIGHTS[p]:>7.0%}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
