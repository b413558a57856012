"""Anthropic's OTPM at real latency (issue 39): output is held at `max_tokens` from admission to
the answer's end, then replaced by the real output (shared/PROTOCOLS.md, "Anthropic output tokens
at real latency"). The key below allows ~25 requests a second (ITPM binds; the output held in
flight, ~17 requests × 300, fits the output bucket); a client that let only one second of output
be held in flight ran at 4.2 a second (pace 0.15-0.21). Judged on a FakeClock over real sockets."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from batchgate.clock import FakeClock
from batchgate.config import config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.gateway import Gateway
from batchgate.quota.store.location import StoreSpec
from clocks import on_fake_time

LIMITS = {"rpm": 4000, "itpm": 120_000, "otpm": 60_000}
MAX_TOKENS = 300
PROMPT_BYTES = 270  # ~80 input tokens (3.5 bytes a token, 3 of framing): ITPM binds at 25 a second


def bodies(n: int, seed: int = 5) -> list[dict[str, Any]]:
    """`n` Messages bodies whose echoed answers are 20-60 tokens (`max_tokens` 5-15× that)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        width = rng.randint(4, 16)
        prompt = "echo " + " ".join("w" * width for _ in range(11))
        prompt += " " + "p" * max(1, PROMPT_BYTES - len(prompt) - 1)
        messages = [{"role": "user", "content": prompt}]
        out.append({"model": "m", "max_tokens": MAX_TOKENS, "messages": messages})
    return out


def provider(depth: float) -> dict[str, Any]:
    """The issue's Anthropic key: token buckets `depth` seconds deep, output adjusted at the end,
    latency 0.5 s p50 (σ 0.4) + 4 ms per output token, headers on the per-minute scale."""
    return {
        "name": "claude",
        "family": "anthropic",
        "limits": LIMITS,
        "enforcement": {"kind": "token_bucket", "burst_seconds": depth},
        "output_charge": "adjusted",
        "latency": {"ttft_p50_ms": 500, "ttft_sigma": 0.4, "per_token_ms": 4},
        "headers": "minute",
    }


async def run(depth: float, n: int, ledger: Path | None = None) -> tuple[float, int, int]:
    """(pace of the binding bucket, answered, the provider's 429s) for `n` requests; with
    `ledger`, the quota shared through that SQLite ledger (`batchgate run`'s default)."""
    clock = FakeClock()
    emu = Emulator(emulator_config_from_dict({"seed": 7, "providers": [provider(depth)]}), clock=clock)
    await emu.start()
    try:
        entry = {"name": "claude", "kind": "anthropic", "base_url": emu.base_url("claude"), "limits": LIMITS}
        config = config_from_dict(
            {"providers": [entry], "routes": [{"model": "m", "targets": ["claude"]}]}, environ={}
        )
        store = StoreSpec("memory") if ledger is None else StoreSpec("sqlite", str(ledger))
        async with Gateway(config, clock=clock, quota_store=store) as gw:
            results = await on_fake_time(clock, gw.abatch(bodies(n)))
        stats = emu.stats()["providers"]["claude"]
    finally:
        await emu.stop()
    span = stats["last_success_admitted_s"] - stats["first_request_s"]
    used = {"input": 0, "output": 0}
    for r in results:
        if r.ok and r.usage is not None:
            used["input"] += r.usage.prompt_tokens
            used["output"] += r.usage.completion_tokens
    pace = max(used["input"] / (LIMITS["itpm"] / 60), used["output"] / (LIMITS["otpm"] / 60)) / span
    return pace, sum(r.ok for r in results), stats["rejected"]["rate_limit"]


@pytest.mark.parametrize(
    "shared", [pytest.param(False, id="memory"), pytest.param(True, id="ledger", marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("depth", [8.0, 60.0])
async def test_anthropic_output_held_in_flight_costs_no_pace(
    depth: float, shared: bool, tmp_path: Path
) -> None:
    pace, answered, refused = await run(depth, 300, tmp_path / "ledger.sqlite3" if shared else None)
    assert answered == 300
    assert refused <= 3  # 1%
    assert pace >= 0.9  # was 0.19 (one second held in flight); 0.76 via a ledger not told of the depth
