"""How fast batchgate settles when a provider halves its capacity mid-run. Prints figures; asserts
nothing (it runs on the real clock, so it lives here rather than in the tests).

    python bench/capacity_halving.py [--rpm 12000] [--change-at 3] [--settle 2] [--requests 1500]

The emulated provider admits `--rpm` requests per minute, then half as many from `--change-at`
seconds on. Printed: the share of 429s among the attempts after `--settle` more seconds (the
target is under 1%), and the most admissions the emulator saw in any 1 s window after settling,
against the new limit's per-second rate (the target: within 1.5 × plus a burst of 5).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from batchgate import Emulator, Gateway, config_from_dict
from batchgate.emulator import emulator_config_from_dict


def _configs(rpm: int, change_at: float) -> tuple[Any, dict[str, Any]]:
    emu_cfg = emulator_config_from_dict(
        {
            "seed": 11,
            "providers": [
                {
                    "name": "p",
                    "family": "openai",
                    "limits": {"rpm": rpm, "tpm": 10**9},
                    "limit_changes": [{"at": change_at, "rpm": rpm // 2}],
                }
            ],
        }
    )
    settings = {
        "seed": 5,
        "retry": {"max_attempts": 8, "base_delay": 0.02, "max_delay": 0.1},
        "timeouts": {"connect": 2, "total": 10},
    }
    return emu_cfg, settings


async def run(rpm: int, change_at: float, settle: float, n: int) -> dict[str, Any]:
    emu_cfg, settings = _configs(rpm, change_at)
    async with Emulator(emu_cfg) as emu:
        cfg = config_from_dict(
            {
                "providers": [
                    {"name": "p", "kind": "openai", "base_url": emu.base_url("p"), "limits": {"rpm": rpm}}
                ],
                "routes": [{"model": "m", "targets": ["p"]}],
                "settings": settings,
            },
            environ={},
        )
        mid: list[dict[str, Any]] = []

        async def snapshot_after_settling() -> None:
            await asyncio.sleep(change_at + settle)
            mid.append(emu.stats()["providers"]["p"])

        snap = asyncio.ensure_future(snapshot_after_settling())
        requests = [
            {"model": "m", "messages": [{"role": "user", "content": f"halving {i}"}]} for i in range(n)
        ]
        async with Gateway(cfg) as gw:
            results = await gw.abatch(requests)
        await snap
        end = emu.stats()["providers"]["p"]
    late_429 = end["rejected"]["rate_limit"] - mid[0]["rejected"]["rate_limit"] if mid else None
    late_ok = end["admitted"] - mid[0]["admitted"] if mid else None
    later = [(t, k) for t, k, _ in end["series"] if t >= change_at + settle]
    peak = max((sum(k for t, k in later if t0 <= t < t0 + 1.0) for t0, _ in later), default=0)
    return {
        "completed": sum(1 for r in results if r.ok),
        "requests": n,
        "late_admitted": late_ok,
        "late_429": late_429,
        "late_429_share": (late_429 / (late_429 + late_ok)) if late_ok else None,
        "peak_admitted_per_1s": peak,
        "new_limit_per_s": rpm / 2 / 60,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=12_000)
    parser.add_argument("--change-at", type=float, default=3.0)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--requests", type=int, default=1500)
    args = parser.parse_args()
    figures = asyncio.run(run(args.rpm, args.change_at, args.settle, args.requests))
    for key, value in figures.items():
        print(f"{key:>22}: {value:.4f}" if isinstance(value, float) else f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
