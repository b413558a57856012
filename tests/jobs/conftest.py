"""The store fixture: every conformance test runs against each JobStore implementation.

Each backend carries its own marker (`-m postgres`, `-m "not postgres"`). Every store runs on the
test's `ManualWall`, leases included (Postgres is given it as its lease clock), so lease expiry is
tested by moving the clock, never by sleeping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.postgres import PgJobStore
from batchgate.jobs.store.protocol import JobStore
from batchgate.jobs.store.sqlite import SqliteJobStore
from pgutil import fresh_schema

from .factories import ManualWall

STORE_KINDS = [
    pytest.param("memory", marks=pytest.mark.memory),
    pytest.param("sqlite", marks=pytest.mark.sqlite),
    pytest.param("postgres", marks=pytest.mark.postgres),
]


async def open_store(kind: str, tmp_path: Path, wall: ManualWall, stack: ExitStack) -> JobStore:
    if kind == "memory":
        return MemoryJobStore(wall=wall)
    if kind == "sqlite":
        return await SqliteJobStore.open(tmp_path / "jobs.db", wall=wall)
    return await PgJobStore.open(stack.enter_context(fresh_schema()), wall=wall, lease_clock=wall)


@pytest.fixture
def wall() -> ManualWall:
    return ManualWall()


@pytest.fixture
def exit_stack() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


@pytest.fixture(params=STORE_KINDS)
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, wall: ManualWall, exit_stack: ExitStack
) -> AsyncIterator[JobStore]:
    s = await open_store(request.param, tmp_path, wall, exit_stack)
    try:
        yield s
    finally:
        await s.close()
