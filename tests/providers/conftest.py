"""Fixtures the network tests share (`test_network.py`, `test_transport_conformance.py`): one
emulated OpenAI provider on a thread, and a private CA (trustme) with its PEM file. A module that
defines a fixture of the same name uses its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from netutil import make_ca


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorThread]:
    providers = [{"name": "alpha", "family": "openai", "limits": {"rpm": 100_000, "tpm": 10**8}}]
    with EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": providers})) as running:
        yield running


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, trustme.LeafCert, Path]:
    authority, leaf = make_ca()
    pem = tmp_path_factory.mktemp("ca") / "ca.pem"
    authority.cert_pem.write_to_path(str(pem))
    return authority, leaf, pem
