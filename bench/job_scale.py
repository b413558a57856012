"""A big job (ten million tasks with `--lines 10000000`): peak memory, time to the first request,
completions per second, and how fast a resume after kill -9 starts sending.

    python bench/job_scale.py [--lines 1000000] [--run-seconds 20]

Generates an input of `--lines` plain JSONL lines in a temp dir, starts an emulator process with
no quota and no latency, runs `batchgate run` on it for `--run-seconds` after its first request,
kills it with SIGKILL, then re-runs the same command and measures the time from launch until the
emulator sees the resumed process's first request. The input is stored behind the sending
(`jobs/ingest.py`), so the first request does not wait for the whole file. Prints the four
figures, one a line: peak RSS (of both processes, from /proc/PID/status VmHWM, sampled), first
request after launch, completions/s while running, and the resume's first request after launch.
A figures script, not a test; the input file is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from batchgate.emulator import EmulatorProcess

EMULATOR = """seed: 1
providers:
  - name: alpha
    family: openai
    limits: {rpm: 100000000, tpm: 100000000000}
    latency: {ttft_p50_ms: 0, per_token_ms: 0}
"""


def write_input(path: Path, lines: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(f'{{"custom_id":"t{i}","model":"m","max_tokens":4,"prompt":"echo item {i}"}}\n')


def emulator_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/_emulator/stats", timeout=5) as r:
        data: dict[str, Any] = json.loads(r.read())
    alpha: dict[str, Any] = data["providers"]["alpha"]
    return alpha


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def launch(cmd: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(
    proc: subprocess.Popen[bytes], url: str, dispatch_s: float | None
) -> tuple[float, int, float, int]:
    """Sample the resumed run's RSS until it ends: (peak MB, completions in all, seconds, its completions)."""
    assert dispatch_s is not None, "the resumed run never sent"
    start, base, peak = time.perf_counter(), emulator_stats(url)["completed"], 0.0
    while proc.poll() is None:
        time.sleep(0.5)
        peak = max(peak, peak_rss_mb(proc.pid))
    total = emulator_stats(url)["completed"]
    return peak, total, time.perf_counter() - start, total - base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--run-seconds", type=float, default=20.0)
    ap.add_argument(
        "--finish",
        action="store_true",
        help="let the resumed run go to the end of the job: peak RSS over the whole job, sustained rate",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bg-scale-") as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "emu.yaml").write_text(EMULATOR, encoding="utf-8")
        t = time.perf_counter()
        write_input(tmp / "in.jsonl", args.lines)
        size_mb = (tmp / "in.jsonl").stat().st_size / 1e6
        print(f"input: {args.lines:,} lines, {size_mb:.0f} MB (written in {time.perf_counter() - t:.1f} s)")
        with EmulatorProcess(tmp / "emu.yaml") as emu:
            (tmp / "gw.yaml").write_text(
                "providers:\n  - {name: alpha, kind: openai, base_url: "
                f"'{emu.base_url('alpha')}', limits: {{}}}}\n"
                "routes:\n  - {model: m, targets: [alpha]}\nsettings: {concurrency: 64}\n",
                encoding="utf-8",
            )
            cmd = [
                sys.executable,
                "-m",
                "batchgate",
                "run",
                "in.jsonl",
                "--config",
                "gw.yaml",
                "--output",
                "out.jsonl",
                "--store",
                "jobs.db",
                "--progress",
                "quiet",
            ]
            # First run: load the job, send for a while, then die without warning.
            start = time.perf_counter()
            proc = launch(cmd, tmp)
            first_seen = None
            peak1 = 0.0
            while time.perf_counter() - start < 600:
                time.sleep(0.1)
                peak1 = max(peak1, peak_rss_mb(proc.pid))
                admitted = emulator_stats(emu.url)["admitted"]
                if admitted and first_seen is None:
                    first_seen = (time.perf_counter(), admitted)
                if first_seen and time.perf_counter() - first_seen[0] >= args.run_seconds:
                    break
                if proc.poll() is not None:
                    break
            assert first_seen is not None, (proc.stderr.read() if proc.stderr else b"").decode()
            before_kill = emulator_stats(emu.url)["completed"]
            ran = time.perf_counter() - first_seen[0]
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            load_s = first_seen[0] - start
            rate = before_kill / ran
            # Resume: the same command; time until the emulator sees a new request.
            base = emulator_stats(emu.url)["admitted"]
            start = time.perf_counter()
            proc = launch(cmd, tmp)
            peak2 = 0.0
            dispatch_s = None
            while time.perf_counter() - start < 120:
                time.sleep(0.02)
                peak2 = max(peak2, peak_rss_mb(proc.pid))
                if emulator_stats(emu.url)["admitted"] > base:
                    dispatch_s = time.perf_counter() - start
                    break
                if proc.poll() is not None:
                    break
            if args.finish:
                finished = finish(proc, emu.url, dispatch_s)
                peak2 = max(peak2, finished[0])
            else:
                for _ in range(50):
                    time.sleep(0.1)
                    peak2 = max(peak2, peak_rss_mb(proc.pid))
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            shown = f"{dispatch_s:.2f} s" if dispatch_s is not None else "never (see stderr)"
            print(f"peak RSS: {max(peak1, peak2):.0f} MB (first run {peak1:.0f} MB, resume {peak2:.0f} MB)")
            print(f"first request: {load_s:.2f} s after launch (process start included)")
            print(f"completions/s: {rate:,.0f} ({before_kill:,} completions in {ran:.1f} s, then SIGKILL)")
            print(f"resume after kill -9: first request {shown} after launch (process start included)")
            if args.finish:
                total, elapsed = finished[1], finished[2]
                print(
                    f"whole job: {total:,} completions in all; the resumed run sent {finished[3]:,} in "
                    f"{elapsed:.0f} s ({finished[3] / elapsed:,.0f}/s sustained), exit code {proc.returncode}"
                )


if __name__ == "__main__":
    main()
