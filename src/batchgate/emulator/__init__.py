"""An HTTP emulator of LLM providers (OpenAI Chat Completions and Anthropic Messages) with quotas,
concurrency caps, latency and faults, deterministic from a seed — for tests, demos and benchmarks.

    async with Emulator(load_emulator_config("emulator.yaml")) as emu:
        client = openai.AsyncOpenAI(base_url=emu.base_url("alpha"), api_key="x")

May import: itself, `clock`, `errors` and `tokens`. Nothing of the client side (an adversary, not a
mirror); the gateway and the CLI may start it.
"""

from typing import TYPE_CHECKING, Any

from batchgate.emulator.config import (
    EmulatorConfig,
    FaultRates,
    LatencyConfig,
    Limits,
    ProviderConfig,
    emulator_config_from_dict,
    load_emulator_config,
)
from batchgate.emulator.openai_endpoints import embedding_vector
from batchgate.emulator.server import Emulator

if TYPE_CHECKING:
    from batchgate.emulator.runner import EmulatorProcess, EmulatorThread

__all__ = [
    "Emulator",
    "EmulatorConfig",
    "EmulatorProcess",
    "EmulatorThread",
    "FaultRates",
    "LatencyConfig",
    "Limits",
    "ProviderConfig",
    "embedding_vector",
    "emulator_config_from_dict",
    "load_emulator_config",
]


def __getattr__(name: str) -> Any:
    """`EmulatorThread` and `EmulatorProcess` on first use: an embedded emulator needs neither
    (nor the threading, subprocess and urllib they bring)."""
    if name in ("EmulatorProcess", "EmulatorThread"):
        from batchgate.emulator import runner  # noqa: PLC0415 — see above

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
