"""How fast a run that cannot succeed stops: issue 30's two rows, as a user meets them.

    python bench/dead_providers.py [--lines 200] [--big 2000] [--rpm 300]

`wrong key`: `--lines` lines to an emulated OpenAI-style provider that wants another API key
(it answers 401 `invalid_api_key`), at `--rpm`. `closed port`: `--big` lines to a base_url where
nothing listens. Each is `batchgate run` as a subprocess in a fresh folder; printed: the exit
code, the wall time from spawn to exit, the provider calls made (the emulator's 401s; the
report's connection attempts) and the stop line (for the wrong key, whose route alone stops since
issue 38 — every line failed at once, exit 6 — the first line of the errors file). Before take-out
(8782eca) the first ran 41 s with 200 x 401 and the second was still going after 5 minutes.

Prints figures; asserts nothing about time (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

RIGHT, WRONG = "sk-bench-right", "sk-bench-wrong"


def _config(folder: Path, base_url: str, rpm: int) -> Path:
    provider = {"name": "alpha", "kind": "openai", "base_url": base_url, "api_key_env": "BENCH_KEY"}
    data: dict[str, Any] = {
        "providers": [{**provider, "limits": {"rpm": rpm}}],
        "routes": [{"model": "m", "targets": ["alpha:gpt-4o-mini"]}],
        "prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.60}},
    }
    path = folder / "gw.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _run(folder: Path, base_url: str, lines: int, rpm: int) -> tuple[int, float, str, dict[str, Any]]:
    src = folder / "in.jsonl"
    rows = (
        {
            "custom_id": f"i{i}",
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": str(i)}],
        }
        for i in range(lines)
    )
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    cfg = _config(folder, base_url, rpm)
    argv = [sys.executable, "-m", "batchgate", "run", str(src), "--config", str(cfg)]
    argv += ["--output", str(folder / "out.jsonl"), "--store", str(folder / "store" / "jobs.db"), "-q"]
    env = {**os.environ, "BENCH_KEY": WRONG, "XDG_CACHE_HOME": str(folder / "cache")}
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=600)
    took = time.monotonic() - started
    stop = next((line for line in done.stderr.splitlines() if " stopped: " in line), done.stderr.strip())
    errors = folder / "out.jsonl.errors.jsonl"
    if errors.exists() and errors.stat().st_size:  # the route stopped alone: its lines failed
        first = orjson.loads(errors.read_bytes().splitlines()[0])
        stop = f"{sum(1 for _ in errors.open('rb'))} failed; first: {first.get('error')}"
    report: dict[str, Any] = orjson.loads((folder / "out.jsonl.report.json").read_bytes())
    return done.returncode, took, stop, report


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--big", type=int, default=2000)
    ap.add_argument("--rpm", type=int, default=300)
    args = ap.parse_args()
    provider = {"name": "alpha", "family": "openai", "api_key": RIGHT, "limits": {"rpm": 10**6, "tpm": 10**9}}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": [provider]}))
    emu.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            code, took, stop, _ = _run(Path(tmp), emu.base_url("alpha"), args.lines, args.rpm)
        refused = emu.stats()["providers"]["alpha"]["rejected"]["auth"]
    finally:
        emu.stop()
    print(f"wrong key, {args.lines} lines at {args.rpm} rpm: exit {code} after {took:.2f} s, {refused} x 401")
    print(f"  {stop}")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"http://127.0.0.1:{_closed_port()}/v1"
        code, took, stop, report = _run(Path(tmp), url, args.big, args.rpm)
    tried = report["providers"]["alpha"]["unreachable_attempts"]
    print(f"closed port, {args.big} lines at {args.rpm} rpm: exit {code} after {took:.2f} s, {tried} tries")
    print(f"  {stop}")


if __name__ == "__main__":
    main()
