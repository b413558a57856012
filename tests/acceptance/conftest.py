"""Fixtures: a fresh emulator per test (its counters are the evidence) and a CLI runner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread

from .harness import Cli, cli_under, emulator


@pytest.fixture
def emu() -> Iterator[EmulatorThread]:
    thread = emulator()
    try:
        yield thread
    finally:
        thread.stop()


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    with cli_under(tmp_path) as runner:
        yield runner
