"""batchgate: run large batches of LLM requests across providers as fast as their quotas allow.

The public API, importable from here:

    from batchgate import Gateway, load_config
    async with Gateway(load_config("batchgate.yaml")) as gw:
        results = await gw.abatch(requests)
    report = Job("in.jsonl", config="batchgate.yaml", output="out.jsonl").run()  # durable jobs

Names load on first use, so `import batchgate` (and the CLI's start-up) stays light. Everything
else is internal; docs/architecture.md maps the packages.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchgate.clock import Clock, FakeClock, LoopClock
    from batchgate.config import GatewayConfig, config_from_dict, load_config
    from batchgate.emulator import Emulator, EmulatorConfig, load_emulator_config
    from batchgate.errors import (
        BatchgateError,
        ConfigError,
        InputError,
        JobError,
        ProviderError,
        RateLimitError,
    )
    from batchgate.gateway import Gateway
    from batchgate.jobs.api import Job, JobResult
    from batchgate.models import ChatBody, Result, Usage
    from batchgate.stats import GatewayStatistics

_WHERE = {
    "BatchgateError": "batchgate.errors",
    "ChatBody": "batchgate.models",
    "Clock": "batchgate.clock",
    "ConfigError": "batchgate.errors",
    "Emulator": "batchgate.emulator",
    "EmulatorConfig": "batchgate.emulator",
    "FakeClock": "batchgate.clock",
    "Gateway": "batchgate.gateway",
    "GatewayConfig": "batchgate.config",
    "GatewayStatistics": "batchgate.stats",
    "InputError": "batchgate.errors",
    "Job": "batchgate.jobs.api",
    "JobError": "batchgate.errors",
    "JobResult": "batchgate.jobs.api",
    "LoopClock": "batchgate.clock",
    "ProviderError": "batchgate.errors",
    "RateLimitError": "batchgate.errors",
    "Result": "batchgate.models",
    "Usage": "batchgate.models",
    "config_from_dict": "batchgate.config",
    "load_config": "batchgate.config",
    "load_emulator_config": "batchgate.emulator",
}

__all__ = [
    "BatchgateError",
    "ChatBody",
    "Clock",
    "ConfigError",
    "Emulator",
    "EmulatorConfig",
    "FakeClock",
    "Gateway",
    "GatewayConfig",
    "GatewayStatistics",
    "InputError",
    "Job",
    "JobError",
    "JobResult",
    "LoopClock",
    "ProviderError",
    "RateLimitError",
    "Result",
    "Usage",
    "config_from_dict",
    "load_config",
    "load_emulator_config",
]


def __getattr__(name: str) -> object:
    """Load a public name from its module on first use (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'batchgate' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
