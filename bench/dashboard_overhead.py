"""What the web dashboard costs a server's jobs: one `batchgate serve` runs a job of N requests on
a zero-latency, unlimited emulated provider (the server's own CPU per request is all there is to
see), with nobody watching and with a dashboard open on the job — its list and the job's page
polled every `--poll` seconds, harsher than a browser's 2 s.

    python bench/dashboard_overhead.py [--items 20000] [--repeats 3] [--poll 0.5]

The two setups alternate, one fresh server each time. Per setup, the median of the server's CPU
ms per request (its /proc figures: user + system, start-up excluded) and of requests per second
from the job's creation to its end, and the ratio watched ÷ unwatched. Prints figures; asserts
nothing.
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

import httpx
import orjson
from serve_bench import MODEL, served, write_config

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _requests(n: int) -> list[dict[str, Any]]:
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    return [
        {"custom_id": f"r-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
        for i in range(n)
    ]


def _watch(http: httpx.Client, job_id: str, poll: float, done: threading.Event) -> int:
    polls = 0
    while not done.wait(poll):
        http.get("/v1/dashboard/jobs").raise_for_status()
        http.get(f"/v1/dashboard/jobs/{job_id}").raise_for_status()
        polls += 1
    return polls


def one_run(emu: EmulatorThread, n: int, watched: bool, poll: float) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp, served(Path(tmp), _config(Path(tmp), emu)) as server:
        headers = {"Authorization": f"Bearer {server.key}"}
        http = httpx.Client(base_url=server.url, headers=headers, timeout=60)
        cpu0, t0 = _cpu_s(server.process.pid), time.monotonic()
        lines = b"".join(orjson.dumps(r) + b"\n" for r in _requests(n))
        upload = {"file": ("in.jsonl", lines)}
        file_id = http.post("/v1/files", files=upload, data={"purpose": "batch"}).json()["id"]
        job = http.post("/v1/jobs", json={"input_file_id": file_id}).json()
        done, polls = threading.Event(), [0]
        watcher = threading.Thread(target=lambda: polls.__setitem__(0, _watch(http, job["id"], poll, done)))
        if watched:
            watcher.start()
        while http.get(f"/v1/jobs/{job['id']}").json()["state"] not in ("completed", "failed", "cancelled"):
            time.sleep(0.2)
        elapsed, cpu = time.monotonic() - t0, _cpu_s(server.process.pid) - cpu0
        done.set()
        if watched:
            watcher.join()
        return cpu * 1000 / n, n / elapsed, polls[0]


def _config(root: Path, emu: EmulatorThread) -> Path:
    return write_config(root / "gw.yaml", emu, None, concurrency=64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--poll", type=float, default=0.5)
    args = parser.parse_args()
    latency = {"ttft_p50_ms": 0.0, "ttft_sigma": 0.0, "per_token_ms": 0}
    provider = {
        "name": "alpha",
        "family": "openai",
        "limits": {"rpm": 10**9, "tpm": 10**12},
        "latency": latency,
    }
    emu = EmulatorThread(emulator_config_from_dict({"seed": 7, "providers": [provider]}))
    emu.start()
    runs: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    try:
        for _ in range(args.repeats):
            for watched in (False, True):
                runs[watched].append(one_run(emu, args.items, watched, args.poll))
    finally:
        emu.stop()
    print(f"dashboard overhead, {args.items:,} requests on `batchgate serve`, median of {args.repeats}:")
    med = {}
    for watched, found in runs.items():
        cpu, rate = statistics.median(r[0] for r in found), statistics.median(r[1] for r in found)
        med[watched] = (cpu, rate)
        polls = statistics.median(r[2] for r in found)
        name = f"watched (list + job page every {args.poll:g} s, {polls:g} polls)" if watched else "unwatched"
        print(f"  {name:<48} server CPU {cpu:.3f} ms/req  {rate:.0f} req/s")
    cpu_ratio, rate_ratio = med[True][0] / med[False][0], med[True][1] / med[False][1]
    print(f"  watched ÷ unwatched: CPU {cpu_ratio:.3f}, throughput {rate_ratio:.3f}")


if __name__ == "__main__":
    main()
