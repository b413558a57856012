"""Several models on one key (issue #28): does each run at its own limit under every quota store?
Prints figures and whether each pool meets the target; asserts nothing (it runs on the real clock).

    python bench/per_model_quota.py [--seconds 6] [--stores memory local redis] [--seeds 7 8 9]

One emulated OpenAI key limits its models apart (`model_limits`, one-second token buckets), as
OpenAI does: `small` 1,200 rpm, `large` 300 rpm, and a pool of 600 rpm that `mini` and `mini-2`
share (OpenAI's limits page shows a few such groups). The gateway's config says the same in one
provider entry's `models:` map (`small`, `large`, `"mini,mini-2"`), and sends each pool's items
(`--seconds` of its quota each; the shared pool's split between its two models) all at once.
Per store (`memory`: this process's pools; `local`: a SQLite ledger as `batchgate run` keeps by
default; `redis`: BATCHGATE_BENCH_REDIS, default redis://127.0.0.1:6379/0, skipped when none
answers), seed and pool: its pace — the pool's quota seconds (its items ÷ its rate) over the
seconds from its first request sent to the sending of its last one that succeeded, as the quota
matrix measures — and its 429s per request. Target (issue #28): every pool pace ≥ 0.95 and
≤ 0.5% 429s, on the median over the seeds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from batchgate.config import config_from_dict
from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.errors import QuotaStoreUnavailable
from batchgate.gateway import Gateway
from batchgate.models import Result
from batchgate.quota.store.location import resolve

POOLS = {"small": 1200, "large": 300, "mini,mini-2": 600}  # rpm per pool; "a,b": one pool two models share
REDIS = os.environ.get("BATCHGATE_BENCH_REDIS", "redis://127.0.0.1:6379/0")
PACE, R429 = 0.95, 0.005


def _emulator(seed: int) -> EmulatorThread:
    provider = {
        "name": "p",
        "family": "openai",
        "limits": {"rpm": 100_000, "tpm": 10**9},
        "model_limits": {pool: {"rpm": rpm} for pool, rpm in POOLS.items()},
        "enforcement": {"kind": "token_bucket", "burst_seconds": 1},
        "latency": {"ttft_p50_ms": 300, "ttft_sigma": 0.3, "per_token_ms": 2},
    }
    emu = EmulatorThread(emulator_config_from_dict({"seed": seed, "providers": [provider]}))
    emu.start()
    return emu


def _config(url: str, store: str) -> Any:
    quota: dict[str, Any] = {"store": store}
    if store.startswith("redis"):
        quota["namespace"] = f"bench:{secrets.token_hex(4)}:"
    models = [m for pool in POOLS for m in pool.split(",")]
    entry = {"name": "key", "kind": "openai", "base_url": url, "api_key": "sk-one-key-many-models"}
    return config_from_dict(
        {
            "providers": [{**entry, "models": {pool: {"rpm": rpm} for pool, rpm in POOLS.items()}}],
            "routes": [{"model": m, "targets": ["key"]} for m in models],
            "quota": quota,
        },
        source="bench",
        environ={},
    )


def _figures(pool: str, results: list[Result], items: int) -> tuple[float, float, int]:
    """(pace, 429s per request, failed) of one pool's results."""
    attempts = [a for r in results for a in r.attempts]
    sent = [a.started for r in results if r.ok for a in r.attempts if a.status == 200]
    span = max(sent) - min(a.started for a in attempts) if sent else 0.0
    pace = items / (POOLS[pool] / 60) / span if span > 0 else 0.0
    r429 = sum(1 for a in attempts if a.status == 429) / items
    return pace, r429, sum(1 for r in results if not r.ok)


async def _round(store: str, seconds: float, seed: int) -> dict[str, tuple[float, float, int]]:
    emu = _emulator(seed)
    try:
        async with Gateway(_config(emu.base_url("p"), store)) as gw:

            async def one(pool: str) -> list[Result]:
                models = pool.split(",")
                bodies = [
                    {
                        "model": models[i % len(models)],
                        "max_tokens": 4,
                        "messages": [{"role": "user", "content": f"echo {i}"}],
                    }
                    for i in range(int(POOLS[pool] / 60 * seconds))
                ]
                return await gw.abatch(bodies)

            done = await asyncio.gather(*(one(pool) for pool in POOLS))
    finally:
        emu.stop()
    return {pool: _figures(pool, res, len(res)) for pool, res in zip(POOLS, done, strict=True)}


def _store_rounds(label: str, spec: str, seconds: float, seeds: list[int]) -> bool:
    runs = []
    for seed in seeds:
        figures = asyncio.run(_round(spec, seconds, seed))
        runs.append(figures)
        text = "  ".join(
            f"{p}: pace {f[0]:.3f} 429s {100 * f[1]:.1f}% failed {f[2]}" for p, f in figures.items()
        )
        print(f"{label:7s} seed {seed}  {text}", flush=True)
    ok = True
    parts = []
    for pool in POOLS:
        pace = statistics.median(r[pool][0] for r in runs)
        r429 = statistics.median(r[pool][1] for r in runs)
        failed = sum(r[pool][2] for r in runs)
        meets = pace >= PACE and r429 <= R429 and failed == 0
        ok &= meets
        parts.append(
            f"{pool}: pace {pace:.3f} 429s {100 * r429:.1f}% failed {failed}{' ✓' if meets else ' ✗'}"
        )
    print(f"{label:7s} median  {'  '.join(parts)}", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds of quota per pool")
    parser.add_argument("--stores", nargs="+", default=["memory", "local", "redis"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[7, 8, 9], help="emulator seeds")
    args = parser.parse_args(argv)
    met = []
    with tempfile.TemporaryDirectory(prefix="per-model-") as tmp:
        for store in args.stores:
            spec = {"local": f"sqlite:{Path(tmp) / 'ledger.sqlite3'}", "redis": REDIS}.get(store, store)
            resolve(spec, os.environ)  # fail early on a bad name
            try:
                met.append((store, _store_rounds(store, spec, args.seconds, args.seeds)))
            except QuotaStoreUnavailable as exc:
                print(f"{store:7s} skipped: {exc.message}", file=sys.stderr)
    summary = ", ".join(f"{store} {'meets' if ok else 'misses'}" for store, ok in met)
    print(
        f"target: every pool pace ≥ {PACE}, ≤ {100 * R429:.1f}% 429s, 0 failed (median over seeds): {summary}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
