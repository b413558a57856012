"""One emulator and one `batchgate serve` (a subprocess) shared by the tests of this package, with
three client keys: `a`, `b` and `admin`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from batchgate.emulator import EmulatorThread

from .harness import Server, emulator, gateway_config, running


@pytest.fixture(scope="package")
def emu() -> Iterator[EmulatorThread]:
    thread = emulator()
    try:
        yield thread
    finally:
        thread.stop()


@pytest.fixture
def fresh_emu() -> Iterator[EmulatorThread]:
    """An emulator of the test's own (its figures and quotas seen by no other test)."""
    thread = emulator()
    try:
        yield thread
    finally:
        thread.stop()


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory, emu: EmulatorThread) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("serve")
    with running(root, gateway_config(root / "gateway.yaml", emu)) as s:
        yield s


@pytest.fixture(scope="package")
def keys(server: Server) -> dict[str, str]:
    return {"a": server.keys_create(), "b": server.keys_create(), "admin": server.keys_create(admin=True)}
