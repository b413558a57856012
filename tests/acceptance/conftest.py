"""Fixtures: a fresh emulator per test (its counters are the evidence), a CLI runner, and one whose
job store is a fresh Postgres schema behind a URL that carries a password (`PG_SECRET`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread
from pgutil import fresh_schema

from .harness import Cli, cli_under, emulator

PG_SECRET = "pg-s3cret-pw"  # trust auth ignores it; it must never be printed


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


@pytest.fixture
def pg_cli(tmp_path: Path) -> Iterator[Cli]:
    with fresh_schema() as url, cli_under(tmp_path) as runner:
        runner.store_url = url.replace("postgresql://postgres@", f"postgresql://postgres:{PG_SECRET}@")
        yield runner
