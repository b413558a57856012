"""Two models on one key (issue #28): does each run at its own limit under every quota store?
Prints figures; asserts nothing (it runs on the real clock).

    python bench/per_model_quota.py [--seconds 6] [--stores memory local redis]

One emulated OpenAI key limits two models apart (`model_limits`: `small` 1,200 rpm, `large`
300 rpm, one-second buckets), as OpenAI does. One gateway has two provider entries with the same
URL and key and different models and limits, and sends each model's items (`--seconds` of its
quota each) at the same time. Per store (`memory`: this process's pools; `local`: a SQLite ledger
as `batchgate run` keeps by default; `redis`: BATCHGATE_BENCH_REDIS, default
redis://127.0.0.1:6379/0, skipped when none answers) and model: the seconds its items took, its
pace (its quota's seconds ÷ those) and the provider's 429s. Until the quota's identity held the
model scope, `local` and `redis` merged the two quotas into one: the faster model stalled behind
the slower one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from batchgate.config import config_from_dict
from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.errors import QuotaStoreUnavailable
from batchgate.gateway import Gateway
from batchgate.quota.store.location import resolve

RPM = {"small": 1200, "large": 300}
REDIS = os.environ.get("BATCHGATE_BENCH_REDIS", "redis://127.0.0.1:6379/0")


def _emulator() -> EmulatorThread:
    provider = {
        "name": "p",
        "family": "openai",
        "limits": {"rpm": 100_000, "tpm": 10**9},
        "model_limits": {m: {"rpm": rpm} for m, rpm in RPM.items()},
        "enforcement": {"kind": "token_bucket", "burst_seconds": 1},
        "latency": {"ttft_p50_ms": 300, "ttft_sigma": 0.3, "per_token_ms": 2},
    }
    emu = EmulatorThread(emulator_config_from_dict({"seed": 7, "providers": [provider]}))
    emu.start()
    return emu


def _config(url: str, store: str) -> Any:
    quota: dict[str, Any] = {"store": store}
    if store.startswith("redis"):
        quota["namespace"] = f"bench:{secrets.token_hex(4)}:"
    entry = {"kind": "openai", "base_url": url, "api_key": "sk-one-key-two-models"}
    return config_from_dict(
        {
            "providers": [{**entry, "name": m, "limits": {"rpm": rpm}} for m, rpm in RPM.items()],
            "routes": [{"model": m, "targets": [m]} for m in RPM],
            "quota": quota,
        },
        source="bench",
        environ={},
    )


async def _round(label: str, store: str, seconds: float) -> dict[str, tuple[float, int]]:
    emu = _emulator()
    try:
        config = _config(emu.base_url("p"), store)
        items = {m: int(rpm / 60 * seconds) for m, rpm in RPM.items()}
        async with Gateway(config) as gw:
            start = time.monotonic()

            async def one(model: str) -> tuple[float, int]:
                bodies = [
                    {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": f"echo {i}"}]}
                    for i in range(items[model])
                ]
                results = await gw.abatch(bodies)
                return time.monotonic() - start, sum(1 for r in results if not r.ok)

            done = await asyncio.gather(*(one(m) for m in RPM))
        rejected = emu.stats()["providers"]["p"]["rejected"]["rate_limit"]
    finally:
        emu.stop()
    print(f"{label:7s} 429s {rejected}", end="")
    out = {}
    for model, (elapsed, failed) in zip(RPM, done, strict=True):
        quota_s = items[model] / (RPM[model] / 60)
        print(f"  {model}: {elapsed:5.2f} s pace {quota_s / elapsed:.2f} failed {failed}", end="")
        out[model] = (elapsed, failed)
    print(flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds of quota per model")
    parser.add_argument("--stores", nargs="+", default=["memory", "local", "redis"])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="per-model-") as tmp:
        for store in args.stores:
            spec = {"local": f"sqlite:{Path(tmp) / 'ledger.sqlite3'}", "redis": REDIS}.get(store, store)
            resolve(spec, os.environ)  # fail early on a bad name
            try:
                asyncio.run(_round(store, spec, args.seconds))
            except QuotaStoreUnavailable as exc:
                print(f"{store:7s} skipped: {exc.message}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
