"""Fixtures for the emulator's tests: configs built from small dicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from batchgate.emulator import EmulatorConfig, emulator_config_from_dict

ProviderFactory = Callable[..., dict[str, Any]]
ConfigFactory = Callable[..., EmulatorConfig]


def _provider(name: str, family: str = "openai", **fields: Any) -> dict[str, Any]:
    """A provider entry with generous limits unless `limits` is given."""
    entry: dict[str, Any] = {"name": name, "family": family}
    if family == "anthropic":
        entry["limits"] = {"rpm": 1_000_000, "itpm": 100_000_000, "otpm": 100_000_000}
    else:
        entry["limits"] = {"rpm": 1_000_000, "tpm": 100_000_000}
    entry.update(fields)
    return entry


def _config(*providers: dict[str, Any], **top: Any) -> EmulatorConfig:
    return emulator_config_from_dict({"seed": 7, "providers": list(providers), **top})


@pytest.fixture
def make_provider() -> ProviderFactory:
    return _provider


@pytest.fixture
def make_config() -> ConfigFactory:
    return _config
