"""Fixtures shared by the reliability tests: the CLI runner, with its job store under tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acceptance.harness import Cli, cli_under


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    with cli_under(tmp_path) as runner:
        yield runner
