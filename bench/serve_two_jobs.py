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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml
from openai import OpenAI

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.server.keys import create_key
from batchgate.server.registry import REGISTRY_FILE, Registry

CLI = [sys.executable, "-m", "batchgate"]
MODEL = "m-bench"


def _emulator(rpm: int, latency_ms: float) -> EmulatorThread:
    latency = {"ttft_p50_ms": latency_ms, "ttft_sigma": 0.2, "per_token_ms": 0}
    provider = {"name": "alpha", "family": "openai", "limits": {"rpm": rpm, "tpm": 10**9}, "latency": latency}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 7, "providers": [provider]}))
    emu.start()
    return emu


def _config(path: Path, emu: EmulatorThread, rpm: int) -> Path:
    """The provider's limit declared, as a user does: each process paces to it."""
    provider = {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha"), "limits": {"rpm": rpm}}
    data = {
        "providers": [provider],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "settings": {"concurrency": 256, "seed": 1},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


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
    config = _config(root / "gw.yaml", emu, rpm)
    procs = []
    for j in (1, 2):
        source = _input(root / f"in{j}.jsonl", f"run{j}", n)
        argv = [*CLI, "run", str(source), "--config", str(config), "--output", str(root / f"out{j}.jsonl")]
        argv += ["--store", str(root / f"jobs{j}.db"), "-q"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for proc in procs:
        proc.wait(timeout=900)


def one_server(root: Path, emu: EmulatorThread, n: int, rpm: int) -> None:
    config = _config(root / "gw.yaml", emu, rpm)
    registry = Registry(root / REGISTRY_FILE)
    key = create_key(registry, admin=False, name="bench", now=int(time.time()))[1]
    registry.close()
    argv = [*CLI, "serve", "--config", str(config), "--port", "0", "--store", str(root / "jobs.db")]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split("listening on ", 1)[1].strip()
        client = OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
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
    finally:
        server.terminate()
        server.wait(timeout=60)


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
        emu = _emulator(args.rpm, args.latency_ms)
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
