"""Provider events in the logs, over real HTTP against the emulator: a limit learned from the
rate-limit headers, and a provider enforcing less than its headers claim — 429s that pause it
(retry hints) and cut its rate (AIMD) — each logged once per change with the provider's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from batchgate.gateway import Gateway
from batchgate.observe.logsetup import logging_to

from .conftest import EmulatorFactory, chat, emu_provider, gateway_config

pytestmark = pytest.mark.integration


def events(path: Path, name: str) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return [e for e in lines if e["event"] == name]


async def test_a_lower_limit_in_the_headers_is_logged_as_learned(
    emulator: EmulatorFactory, tmp_path: Path
) -> None:
    providers = [emu_provider("alpha", limits={"rpm": 1_200, "tpm": 10_000_000})]
    emu = await emulator(providers)
    declared = {"alpha": {"rpm": 6_000, "tpm": 10_000_000}}
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}], limits=declared)
    log = tmp_path / "run.log"
    with logging_to("info", "json", log):
        async with Gateway(cfg) as gw:
            results = await gw.abatch([chat(f"note {i}") for i in range(10)])
    assert all(r.ok for r in results)
    learned = events(log, "limit_learned")
    assert len(learned) == 1, learned  # once: later answers confirm it
    assert learned[0]["provider"] == "alpha"
    assert learned[0]["source"] == "headers"
    assert learned[0]["limits_per_minute"]["requests"] == 1_200


async def test_429s_from_a_provider_enforcing_less_pause_it_and_cut_its_rate(
    emulator: EmulatorFactory, tmp_path: Path
) -> None:
    claimed = {"rpm": 60_000, "tpm": 10_000_000}
    providers = [emu_provider("alpha", limits=claimed, enforced={"rpm": 1_800, "tpm": 10_000_000})]
    emu = await emulator(providers)
    cfg = gateway_config(
        emu,
        providers,
        [{"model": "m", "targets": ["alpha"]}],
        settings={"concurrency": 20},
    )
    log = tmp_path / "run.log"
    with logging_to("info", "json", log):
        async with Gateway(cfg) as gw:
            results = await gw.abatch([chat(f"note {i}") for i in range(60)])
            limited = gw.statistics().providers["alpha"].rate_limited
    assert any(r.ok for r in results)  # (its 429s may outlast some requests' attempts)
    assert limited > 0
    paused = events(log, "paused")
    cuts = events(log, "aimd_cut")
    assert paused, "a 429 with a retry hint pauses the provider"
    assert all(e["provider"] == "alpha" and e["source"] == "retry_hint" and e["seconds"] > 0 for e in paused)
    assert len(paused) < limited  # a pause is logged when it starts, not for each 429 extending it
    assert cuts, "sustained 429s cut the rate"
    assert [e["cuts"] for e in cuts] == list(range(1, len(cuts) + 1))
    assert all(0 < e["factor"] < 1 for e in cuts)
