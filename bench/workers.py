"""1 vs N `batchgate worker` processes on one job, against an overhead-bound emulated provider
(limits far above what we can send, ~1 ms latency), on a Postgres job store. Prints figures;
asserts nothing.

    python bench/workers.py [--tasks 4000] [--workers 1,4,0] [--chunk 50] [--lanes 4]
                            [--concurrency 128] [--latency-ms 1] [--postgres URL]
                            [--kills 10 --kill-every 1 --lease 2]
                            [--rpm 1200 --quota redis://127.0.0.1:6379/0,memory]

For each worker count: a fresh Postgres schema, the job created with `batchgate run --submit-only`,
then the workers (`--exit-when-idle`) launched together; worker count 0 runs the same submitted
job with `batchgate resume` instead (one process, no leases: the baseline). Rates are printed:
- makespan: tasks / (first worker launched -> last worker exited), start-up included;
- sending: tasks / (the emulator's first request -> its last answered admission), the steady rate.
The issue's target is 4 workers >= 3x one on this load; the machine's core count is printed with
it (the emulator runs in this process and shares those cores with the workers).

With `--kills K`, every `--kill-every` seconds one of the N workers gets SIGKILL and a fresh one
takes its place (K times); the lines then also say how many items were lost or written twice and
how many requests were sent again (at most what the killed workers held under their leases;
`--lease` sets the lease length). Use a longer job for it, e.g. `--workers 4 --tasks 10000
--latency-ms 50 --kills 10 --kill-every 1 --lease 2`.

With `--rpm N` the load is quota-bound instead: the provider enforces N requests a minute (over a
one-second sliding window, no burst: the strictest model the emulator plays) and every worker's
config declares it. Each worker count then runs once per `--quota` store (comma-separated: a
redis:// URL holds one limit for all the workers, `memory` gives each worker a pool of its own)
and the lines add the provider's 429s and the pace: successes ÷ what N allows between its first
request and its last admitted success (issue #16's targets: ≤ 0.5% 429s, pace ≥ 0.95). For
example `--rpm 1200 --tasks 400 --latency-ms 300 --workers 4 --quota redis://127.0.0.1:6379/0,memory`.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import psycopg
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
MODEL = "m-bench"
SRC = Path(__file__).resolve().parent.parent / "src"


def _emulator(latency_ms: float, rpm: int | None) -> EmulatorThread:
    provider: dict[str, Any] = {
        "name": "alpha",
        "family": "openai",
        "limits": {"rpm": rpm or 10**9, "tpm": 10**12},
        "latency": {"ttft_p50_ms": latency_ms, "ttft_sigma": 0.1, "per_token_ms": 0},
    }
    if rpm is not None:
        provider["enforcement"] = {"kind": "sliding_window", "window_seconds": 1.0}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": [provider]}))
    emu.start()
    return emu


def _files(
    work: Path, emu: EmulatorThread, n: int, concurrency: int, rpm: int | None, quota: str | None
) -> tuple[Path, Path, Path]:
    src = work / "in.jsonl"
    lines = (
        orjson.dumps(
            {
                "custom_id": f"r{i}",
                "model": MODEL,
                "max_tokens": 5,
                "messages": [{"role": "user", "content": f"Summarise item {i}."}],
            }
        )
        for i in range(n)
    )
    src.write_bytes(b"\n".join(lines) + b"\n")
    cfg = work / "gw.yaml"
    provider: dict[str, Any] = {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")}
    if rpm is not None:
        provider["limits"] = {"rpm": rpm, "tpm": 10**12}
    config: dict[str, Any] = {
        "providers": [provider],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "settings": {"concurrency": concurrency},
    }
    if quota is not None:
        config["quota"] = {"store": quota}
        if quota.startswith("redis"):
            config["quota"]["namespace"] = f"bench:{secrets.token_hex(4)}:"
    cfg.write_text(yaml.safe_dump(config), encoding="utf-8")
    return src, cfg, work / "out.jsonl"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "batchgate", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return env


def _popen(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _run(argv: list[str], n: int, kill: argparse.Namespace | None) -> tuple[list[subprocess.Popen[str]], int]:
    """Start `n` workers; with `kill.kills`, SIGKILL one every `kill.kill_every` s and start a
    replacement, while at least two are still working. Returns the survivors and the kill count."""
    procs = [_popen(argv) for _ in range(n)]
    kills = 0
    while kill is not None and kills < kill.kills:
        time.sleep(kill.kill_every)
        alive = [p for p in procs if p.poll() is None]
        if len(alive) < 2:
            break  # the job is ending
        victim = alive[kills % len(alive)]
        victim.kill()
        victim.communicate()
        procs.remove(victim)
        procs.append(_popen(argv))
        kills += 1
    return procs, kills


def _one(k: int, args: argparse.Namespace, quota: str | None = None) -> dict[str, Any]:
    schema = f"bench_workers_{secrets.token_hex(4)}"
    with psycopg.connect(args.postgres, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{args.postgres}{'&' if '?' in args.postgres else '?'}options=-csearch_path%3D{schema}"
    emu = _emulator(args.latency_ms, args.rpm)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            src, cfg, out = _files(Path(tmp), emu, args.tasks, args.concurrency, args.rpm, quota)
            submit = _cli(
                "run", str(src), "--config", str(cfg), "--output", str(out), "--store", url, "--submit-only"
            )
            subprocess.run(submit, env=_env(), check=True, capture_output=True)
            worker = _cli(
                "worker", "--store", url, "--config", str(cfg), "--exit-when-idle", "--idle-max", "0.2",
                "--chunk-size", str(args.chunk), "--lanes", str(args.lanes), "--lease", str(args.lease),
            )  # fmt: skip
            runs = 1 if k == 0 else k
            if k == 0:  # the baseline: `batchgate run` (here: resume) of the same job, no workers
                worker = _cli("resume", "--store", url, "--progress", "quiet", "-q")
            started = time.perf_counter()
            procs, kills = _run(worker, runs, args if k > 1 else None)
            errs = [p.communicate()[1] for p in procs]
            elapsed = time.perf_counter() - started
            if any(p.returncode for p in procs):
                raise SystemExit(f"a worker failed:\n{''.join(errs)}")
            if not out.exists():
                raise SystemExit(f"no output written:\n{''.join(errs)}")
            ids = [orjson.loads(line)["custom_id"] for line in out.read_bytes().splitlines()]
        stats = emu.stats()["providers"]["alpha"]
    finally:
        emu.stop()
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    window = float(stats["last_success_admitted_s"] or 0) - float(stats["first_request_s"] or 0)
    rejected = sum(stats["rejected"].values())
    answered = stats["completed"] + rejected
    who = f"{k} worker(s)" if k else "batchgate run"
    return {
        "who": who if quota is None else f"{who}, quota {quota.split('://', 1)[0]}",
        "429s": rejected,
        "share_429": rejected / answered if answered else 0.0,
        "pace": stats["completed"] / (args.rpm / 60.0 * window) if args.rpm and window > 0 else None,
        "written": len(ids),
        "lost": args.tasks - len(set(ids)),
        "twice": len(ids) - len(set(ids)),
        "kills": kills,
        "admitted": stats["admitted"],
        "duplicates": stats["duplicates"],
        "makespan_s": elapsed,
        "makespan_rate": args.tasks / elapsed,
        "sending_rate": args.tasks / window if window > 0 else float("nan"),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument(
        "--workers", default="1,4,0", help="comma-separated worker counts (0: `batchgate run`, the baseline)"
    )
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency-ms", type=float, default=1.0, help="the emulated provider's latency")
    parser.add_argument("--lease", type=float, default=30.0, help="the workers' lease (s)")
    parser.add_argument("--kills", type=int, default=0, help="SIGKILL a worker this many times")
    parser.add_argument("--kill-every", type=float, default=1.0, help="seconds between kills")
    parser.add_argument("--postgres", default=PG_DEFAULT)
    parser.add_argument("--rpm", type=int, default=None, help="quota-bound: the provider enforces this rpm")
    parser.add_argument("--quota", default="memory", help="with --rpm: comma-separated quota stores")
    args = parser.parse_args(argv)
    counts = [int(k) for k in args.workers.split(",")]
    print(f"{args.tasks} tasks, chunk {args.chunk}, {args.lanes} lanes/worker, {os.cpu_count()} cores")
    if args.rpm is not None:
        print(f"quota-bound: {args.rpm} rpm over a 1 s sliding window, {args.latency_ms:g} ms latency")
    quotas: list[str | None] = [None] if args.rpm is None else list(args.quota.split(","))
    rows = [_one(k, args, quota) for k in counts for quota in quotas]
    base = rows[0]
    for row in rows:
        makespan = (
            f"{row['makespan_rate']:,.0f} completions/s ({row['makespan_rate'] / base['makespan_rate']:.2f}x)"
        )
        print(
            f"{row['who']}: {row['written']} written, {row['admitted']} sent "
            + f"({row['duplicates']} duplicates); "
            f"makespan {row['makespan_s']:.2f} s = {makespan}; "
            f"sending {row['sending_rate']:,.0f}/s ({row['sending_rate'] / base['sending_rate']:.2f}x)"
        )
        if row["pace"] is not None:
            print(f"  429s {row['429s']} ({row['share_429']:.2%} of answers), pace {row['pace']:.3f}")
        if row["kills"]:
            bound = row["kills"] * args.chunk * args.lanes
            print(
                f"  {row['kills']} workers killed (lease {args.lease:g} s): {row['lost']} items lost, "
                f"{row['twice']} written twice, {row['admitted'] - args.tasks} requests sent again "
                f"(at most the killed workers' leased tasks: {bound})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
