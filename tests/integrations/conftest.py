"""One local Ray instance for every Ray test of the module (starting one takes seconds), skipped
with a reason where Ray Data is not installed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[ModuleType]:
    ray = pytest.importorskip("ray", reason="Ray Data is not installed (pip install 'batchgate[ray]')")
    pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'batchgate[ray]')")
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},  # the actors import this tree's batchgate
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield ray
    finally:
        ray.shutdown()
