"""Two jobs on one provider at once: two `batchgate run` processes (each its own quota pool) versus
two batches in one `batchgate serve` (one quota pool for both), against the same emulated provider.

    python bench/serve_two_jobs.py [--lines 400] [--rpm 3000] [--latency-ms 200]

Per setup, from the provider's side: requests, quota 429s per request, and pace — the quota's
minimum seconds for the requests that succeeded ÷ the seconds from the provider's first request
to the admission of the last one that succeeded (1.0 = the quota used fully while sending; a
token bucket's initial burst can lift it a little above 1). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from openai import OpenAI
from serve_bench import CLI, MODEL, emulator, served, write_config

from batchgate.emulator import EmulatorThread


def _input(path: Path, job: str, n: int) -> Path:
    lines = []
    for i in range(n):
        body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": f"{job} {i}"}]}
        lines.append(
            {"custom_id": f"{job}-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
        )
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


def _figures(emu: EmulatorThread, rpm: int) -> dict[str, Any]:
    p = emu.stats()["providers"]["alpha"]
    r429 = int(p["rejected"]["rate_limit"]) + int(p["rejected"]["concurrency"])
    requests = int(p["admitted"]) + r429
    first, last = p["first_request_s"], p["last_success_admitted_s"]
    span = (last - first) if first is not None and last is not None else None
    bound = int(p["completed"]) / (rpm / 60.0)
    return {
        "requests": requests,
        "succeeded": int(p["completed"]),
        "429_per_request": r429 / requests if requests else 0.0,
        "pace": bound / span if span else None,
    }


def two_runs(root: Path, emu: EmulatorThread, n: int, rpm: int) -> None:
    config = write_config(root / "gw.yaml", emu, rpm, concurrency=256)
    procs = []
    for j in (1, 2):
        source = _input(root / f"in{j}.jsonl", f"run{j}", n)
        argv = [*CLI, "run", str(source), "--config", str(config), "--output", str(root / f"out{j}.jsonl")]
        argv += ["--store", str(root / f"jobs{j}.db"), "-q"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for proc in procs:
        proc.wait(timeout=900)


def one_server(root: Path, emu: EmulatorThread, n: int, rpm: int) -> None:
    with served(root, write_config(root / "gw.yaml", emu, rpm, concurrency=256)) as server:
        client = OpenAI(base_url=server.url + "/v1", api_key=server.key, max_retries=0)
        batches = []
        for j in (1, 2):
            f = client.files.create(
                file=_input(root / f"in{j}.jsonl", f"batch{j}", n).read_bytes(), purpose="batch"
            )
            made = client.batches.create(
                input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            batches.append(made.id)
        for batch_id in batches:
            while client.batches.retrieve(batch_id).status not in ("completed", "failed", "cancelled"):
                time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=400, help="lines per job")
    parser.add_argument("--rpm", type=int, default=3000)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    args = parser.parse_args()
    print(f"two jobs x {args.lines} lines on one provider (rpm {args.rpm}, {args.latency_ms:.0f} ms)")
    print(f"{'setup':<34} {'requests':>8} {'ok':>6} {'429/req':>8} {'pace':>6}")
    for name, setup in (
        ("two `batchgate run` processes", two_runs),
        ("one `batchgate serve`, two batches", one_server),
    ):
        emu = emulator(args.rpm, args.latency_ms)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                setup(Path(tmp), emu, args.lines, args.rpm)
            f = _figures(emu, args.rpm)
        finally:
            emu.stop()
        pace = f"{f['pace']:.2f}" if f["pace"] is not None else "-"
        print(f"{name:<34} {f['requests']:>8} {f['succeeded']:>6} {f['429_per_request']:>8.2%} {pace:>6}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
