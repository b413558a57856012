"""The store fixture: every conformance test runs against each JobStore implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import JobStore
from batchgate.jobs.store.sqlite import SqliteJobStore

STORE_KINDS = ["memory", "sqlite"]


async def open_store(kind: str, tmp_path: Path) -> JobStore:
    if kind == "memory":
        return MemoryJobStore()
    return await SqliteJobStore.open(tmp_path / "jobs.db")


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[JobStore]:
    s = await open_store(request.param, tmp_path)
    try:
        yield s
    finally:
        await s.close()
