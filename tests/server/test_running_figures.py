"""A running batch's request counts and tokens come from its running job, not from the job store:
under load the store's one thread is busy with the job's own writes, and a listing that waited for
it stalled every client's `GET /v1/batches` (issue 27). The store's thread is held here while the
batch runs on a slow provider; its figures must still answer."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from batchgate.clock import LoopClock
from batchgate.config import load_config
from batchgate.emulator import EmulatorThread
from batchgate.gateway import Gateway
from batchgate.jobs.store.sqlite import SqliteJobStore
from batchgate.server.batch_api.files import Files
from batchgate.server.batch_api.run_parts import RunParts
from batchgate.server.batch_api.runs import Runs
from batchgate.server.job_api.job_table import JobTable
from batchgate.server.job_api.native import Jobs, JobTerms
from batchgate.server.tenancy.registry import REGISTRY_FILE, BatchRecord, Registry

from .harness import ALPHA, LAG, PROVIDER_KEY, batch_line, gateway_config

pytestmark = pytest.mark.integration
BOUND_S = 30.0  # a bound on a wait, never a timing assertion


@contextlib.asynccontextmanager
async def service(root: Path, emu: EmulatorThread) -> AsyncIterator[tuple[Jobs, SqliteJobStore]]:
    """The server's batches over a real SQLite job store and gateway, as `service.serve` makes them."""
    config = load_config(gateway_config(root / "gateway.yaml", emu))
    registry, table = Registry(root / REGISTRY_FILE), JobTable(root / REGISTRY_FILE)
    store = await SqliteJobStore.open(root / "jobs.db")
    clock = LoopClock()
    try:
        async with Gateway(config, clock=clock, quota_store=None) as gateway:
            files = Files(registry, root / "files", clock)
            parts = RunParts(registry, files, store, config=config, store_path=root / "jobs.db",
                             folder=root / "batches", gateway=gateway, clock=clock, grace_s=0.1)  # fmt: skip
            jobs = Jobs(Runs(parts, JobTerms(table, config)), table)
            try:
                yield jobs, store
            finally:
                await jobs.close()
    finally:
        await store.close()
        table.close()
        registry.close()


async def _in_progress(jobs: Jobs, batch_id: str) -> BatchRecord:
    """The batch once its job is sending, polled on the loop, bounded."""
    for _ in range(int(BOUND_S / 0.02)):
        b, engine = jobs.parts.registry.get_batch(batch_id), jobs.runs.engine(batch_id)
        if b is not None and b.status == "in_progress" and engine is not None and engine.progress.in_flight:
            return b
        await asyncio.sleep(0.02)
    raise AssertionError(f"batch {batch_id} never ran")


@contextlib.asynccontextmanager
async def store_held(store: SqliteJobStore) -> AsyncIterator[None]:
    """The job store's one thread busy (as under a job's writes) until the block ends."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        release.wait(BOUND_S)

    busy = asyncio.get_running_loop().run_in_executor(store._executor, hold)
    await asyncio.to_thread(held.wait, BOUND_S)
    try:
        yield
    finally:
        release.set()
        await busy


async def _figures(jobs: Jobs, b: BatchRecord) -> tuple[dict[str, int], tuple[int, int]] | None:
    """The batch's request counts and tokens, or None if they waited for the store (bounded)."""
    try:
        runs = jobs.runs
        return await asyncio.wait_for(runs.counts(b), BOUND_S), await asyncio.wait_for(runs.usage(b), BOUND_S)
    except TimeoutError:
        return None


async def test_running_batch_figures_answer_while_the_store_is_busy(
    tmp_path: Path, emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMU_KEY", PROVIDER_KEY)
    async with service(tmp_path, emu) as (jobs, store):
        requests = [batch_line(i, LAG) for i in range(3)]
        b, _ = await jobs.create_job("key-owner", "key-owner", {"requests": requests})
        b = await _in_progress(jobs, b.id)
        async with store_held(store):
            figures = await _figures(jobs, b)
        assert figures is not None, "a running batch's figures waited for the job store"
        counts, usage = figures
        assert counts["total"] == 3
        assert counts["completed"] + counts["failed"] <= 3
        assert min(usage) >= 0


async def test_an_ended_batch_keeps_its_figures(
    tmp_path: Path, emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMU_KEY", PROVIDER_KEY)
    async with service(tmp_path, emu) as (jobs, store):
        b, _ = await jobs.create_job("key-owner", "key-owner", {"requests": [batch_line(0, ALPHA)]})
        await asyncio.wait_for(jobs.runs.settled(b.id), BOUND_S)  # the run and its finalizing
        ended = jobs.parts.registry.get_batch(b.id)
        assert ended is not None
        assert ended.status == "completed"
        async with store_held(store):
            figures = await _figures(jobs, ended)
        assert figures is not None, "an ended batch's figures waited for the job store"
        counts, (prompt, completion) = figures
        assert counts == {"total": 1, "completed": 1, "failed": 0}
        assert prompt > 0
        assert completion > 0
