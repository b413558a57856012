"""Fixtures shared by the reliability tests: the CLI runner, with its job store under tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acceptance.harness import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    work = tmp_path / "work"
    work.mkdir()
    runner = Cli(cwd=work, store=tmp_path / "store" / "jobs.db")
    try:
        yield runner
    finally:
        runner.stop_all()
