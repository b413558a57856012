"""An HTTP emulator of LLM providers (OpenAI Chat Completions and Anthropic Messages) with quotas,
concurrency caps, latency and faults, deterministic from a seed — for tests, demos and benchmarks.

    async with Emulator(load_emulator_config("emulator.yaml")) as emu:
        client = openai.AsyncOpenAI(base_url=emu.base_url("alpha"), api_key="x")

May import: itself, `clock`, `errors` and `tokens`. Nothing of the client side (an adversary, not a
mirror); the gateway and the CLI may start it.
"""

from batchgate.emulator.config import (
    EmulatorConfig,
    FaultRates,
    LatencyConfig,
    Limits,
    ProviderConfig,
    emulator_config_from_dict,
    load_emulator_config,
)
from batchgate.emulator.runner import EmulatorProcess, EmulatorThread
from batchgate.emulator.server import Emulator

__all__ = [
    "Emulator",
    "EmulatorConfig",
    "EmulatorProcess",
    "EmulatorThread",
    "FaultRates",
    "LatencyConfig",
    "Limits",
    "ProviderConfig",
    "emulator_config_from_dict",
    "load_emulator_config",
]
