"""The public API: the names `batchgate` exports, pinned, each loading from its module, and
`import batchgate` itself staying light (the gateway and aiohttp load on first use)."""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module

import pytest

import batchgate

PUBLIC = [
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


def test_the_exported_names_are_pinned_and_sorted() -> None:
    assert batchgate.__all__ == PUBLIC
    assert sorted(batchgate.__all__) == batchgate.__all__


@pytest.mark.parametrize("name", PUBLIC)
def test_each_name_is_the_object_its_module_defines(name: str) -> None:
    value = getattr(batchgate, name)
    owner = import_module(batchgate._WHERE[name])
    assert value is getattr(owner, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = batchgate.Nope


def test_the_readme_import_works() -> None:
    code = "from batchgate import Gateway, load_config; print(Gateway.__module__, load_config.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["batchgate.gateway", "batchgate.config.load"]


def test_importing_batchgate_loads_neither_the_gateway_nor_aiohttp() -> None:
    code = "import sys, batchgate; print('batchgate.gateway' in sys.modules, 'aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
