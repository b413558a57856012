"""Two `batchgate run` processes started together on one machine, one provider key: how well do
they hold its limit together? Prints figures; asserts nothing (it runs on the real clock).

    python bench/shared_quota.py [--rpm 1200] [--items 200] [--processes 2] [--stores memory,local,redis]
                                 [--enforced RPM]   # a hidden limit: the provider enforces less than declared

Each store is a separate round against a fresh emulated provider that admits `--rpm` requests per
minute; every process declares that limit in its config. `memory` is each process on its own
(today's per-process pools), `local` the machine's SQLite ledger (`batchgate run`'s default),
`redis` a Redis server (BATCHGATE_BENCH_REDIS, default redis://127.0.0.1:6379/0; skipped when
none answers). Printed per round: the share of the provider's answers that were 429s, and the
pace: requests it answered successfully ÷ what the limit allows between the first request and the
last admitted success (1.0 is the whole limit the provider enforces). Targets for a shared
store: ≤ 0.5% 429s, pace ≥ 0.9.
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
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

ROOT = Path(__file__).resolve().parents[1]
REDIS = os.environ.get("BATCHGATE_BENCH_REDIS", "redis://127.0.0.1:6379/0")


def _emulator(rpm: int, enforcement: str = "token_bucket", seconds: float = 60.0) -> EmulatorThread:
    latency = {"ttft_p50_ms": 300, "ttft_sigma": 0.3, "per_token_ms": 2}
    provider: dict[str, Any] = {
        "name": "p",
        "family": "openai",
        "limits": {"rpm": rpm, "tpm": 10**9},
        "latency": latency,
    }
    if enforcement != "token_bucket" or seconds != 60.0:
        length = "burst_seconds" if enforcement == "token_bucket" else "window_seconds"
        provider["enforcement"] = {"kind": enforcement, length: seconds}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 7, "providers": [provider]}))
    emu.start()
    return emu


def _config(path: Path, emu: EmulatorThread, rpm: int, store: str) -> Path:
    quota: dict[str, Any] = {"store": store}
    if store.startswith("redis"):
        quota["namespace"] = f"bench:{secrets.token_hex(4)}:"
    data = {
        "providers": [
            {
                "name": "p",
                "kind": "openai",
                "base_url": emu.base_url("p"),
                "api_key": "sk-bench-one-key",
                "limits": {"rpm": rpm},
            }
        ],
        "routes": [{"model": "m", "targets": ["p:gpt-4o-mini"]}],
        "quota": quota,
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _input(path: Path, items: int, tag: str) -> Path:
    lines = (
        orjson.dumps(
            {
                "custom_id": f"{tag}-{i}",
                "model": "m",
                "max_tokens": 8,
                "messages": [
                    {"role": "user", "content": f"Say something short about item {i} of run {tag}."}
                ],
            }
        )
        for i in range(items)
    )
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _round(
    store: str, rpm: int, enforced: int, items: int, processes: int, work: Path, how: tuple[str, float]
) -> dict[str, Any]:
    emu = _emulator(enforced, *how)
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "PYTHONPATH": str(ROOT / "src")}
    try:
        cfg = _config(work / f"{store.split(':', maxsplit=1)[0]}.yaml", emu, rpm, store)
        procs = []
        started = time.monotonic()
        for n in range(processes):
            run_dir = work / f"{store.split(':', maxsplit=1)[0]}-{n}"
            run_dir.mkdir()
            argv = [
                sys.executable,
                "-m",
                "batchgate",
                "run",
                str(_input(run_dir / "in.jsonl", items, str(n))),
            ]
            argv += ["--config", str(cfg), "--output", str(run_dir / "out.jsonl")]
            argv += ["--store", str(run_dir / "jobs.db"), "--progress", "quiet", "-q"]
            procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        codes = [(p.wait(), p.stderr.read().decode() if p.stderr else "") for p in procs]
        wall = time.monotonic() - started
        stats = emu.stats()["providers"]["p"]
    finally:
        emu.stop()
    rejected = sum(stats["rejected"].values())
    answered = stats["completed"] + rejected
    span = (stats["last_success_admitted_s"] or 0.0) - (stats["first_request_s"] or 0.0)
    return {
        "store": store.split("://", maxsplit=1)[0] if "://" in store else store,
        "exit_codes": [c for c, _ in codes],
        "errors": [e.strip().splitlines()[-1] for c, e in codes if c != 0 and e.strip()],
        "requests": answered,
        "429s": rejected,
        "share_429": rejected / answered if answered else 0.0,
        "pace": stats["completed"] / (enforced / 60.0 * span) if span > 0 else 0.0,
        "wall_s": wall,
    }


def _redis_answers() -> bool:
    try:
        import redis  # noqa: PLC0415 — only to see whether the Redis round can run
    except ImportError:
        return False
    try:
        with redis.Redis.from_url(REDIS, socket_connect_timeout=2) as client:
            return bool(client.ping())
    except redis.RedisError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--stores", default="memory,local,redis")
    parser.add_argument(
        "--enforced", type=int, default=None, help="rpm the provider enforces (default --rpm)"
    )
    parser.add_argument(
        "--enforcement",
        choices=("token_bucket", "sliding_window", "fixed_window"),
        default="token_bucket",
        help="how the emulated provider enforces its limit (default: the emulator's token bucket)",
    )
    parser.add_argument(
        "--window", type=float, default=60.0, help="its window or burst length in seconds (default 60)"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bg-shared-quota-") as tmp:
        for name in args.stores.split(","):
            if name == "redis" and not _redis_answers():
                print(f"redis: skipped (no Redis answers at {REDIS})")
                continue
            store = REDIS if name == "redis" else name
            work = Path(tmp) / name
            work.mkdir()
            enforced = args.enforced or args.rpm
            how = (args.enforcement, args.window)
            rows.append(_round(store, args.rpm, enforced, args.items, args.processes, work, how))
    hidden = f" (enforced: {args.enforced})" if args.enforced else ""
    hidden += f", {args.enforcement} of {args.window:g} s"
    runs = f"{args.processes} x `batchgate run` of {args.items} items"
    print(f"{runs}, one key of {args.rpm} rpm{hidden}, together")
    print(f"{'quota store':<12} {'requests':>8} {'429s':>5} {'429 share':>9} {'pace':>6} {'wall s':>7}  exit")
    for r in rows:
        print(
            f"{r['store']:<12} {r['requests']:>8} {r['429s']:>5} {r['share_429']:>9.2%} {r['pace']:>6.3f} "
            f"{r['wall_s']:>7.1f}  {r['exit_codes']}"
        )
        for error in r["errors"]:
            print(f"    {error}")


if __name__ == "__main__":
    main()
