"""Fixtures for the scheduling core: an in-process emulator on a loopback port and a gateway
config pointing at it over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from batchgate.clock import Clock
from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict

Provider = dict[str, Any]


def emu_provider(name: str, family: str = "openai", **extra: Any) -> Provider:
    base: Provider = {
        "name": name,
        "family": family,
        "limits": {"rpm": 60_000, "tpm": 10_000_000}
        if family == "openai"
        else {"rpm": 60_000, "itpm": 10_000_000, "otpm": 10_000_000},
        "latency": {"ttft_p50_ms": 0, "per_token_ms": 0},
    }
    base.update(extra)
    return base


def gateway_config(
    emu: Emulator,
    providers: list[Provider],
    routes: list[dict[str, Any]],
    *,
    limits: dict[str, dict[str, Any]] | None = None,
    settings: dict[str, Any] | None = None,
    tokenizer: str = "auto",
) -> GatewayConfig:
    """A gateway config whose providers are the emulator's, reached over HTTP."""
    limits = limits or {}
    return config_from_dict(
        {
            "providers": [
                {
                    "name": p["name"],
                    "kind": p["family"],
                    "base_url": emu.base_url(p["name"]),
                    "limits": limits.get(p["name"], p["limits"]),
                    "tokenizer": tokenizer,
                }
                for p in providers
            ],
            "routes": routes,
            "settings": {"seed": 1, "retry": {"base_delay": 0.01, "max_delay": 0.2}} | (settings or {}),
        },
        environ={},
    )


EmulatorFactory = Callable[..., Any]


@pytest.fixture
async def emulator() -> AsyncIterator[Callable[[list[Provider]], Any]]:
    started: list[Emulator] = []

    async def start(providers: list[Provider], clock: Clock | None = None, **top: Any) -> Emulator:
        emu = Emulator(emulator_config_from_dict({"seed": 3, "providers": providers, **top}), clock=clock)
        await emu.start()
        started.append(emu)
        return emu

    yield start
    for emu in started:
        await emu.stop()


def chat(text: str, model: str = "m", max_tokens: int = 8) -> dict[str, Any]:
    return {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": text}]}
