"""The job engine with Batch API routes, against an in-process emulator on real time: batch and
live routes in one run, a stop that leaves the batch to the next run (resumed, not resubmitted),
a cancel that cancels the batch at the provider and keeps its partial results, and the budget
sending batch tasks live when their batch worst case does not fit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import EngineHooks, EngineOptions
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskSpec, TaskState

from .factories import job

BATCHED, LIVE = "m-batch", "m-live"


def _config(emu: Emulator, **sections: Any) -> GatewayConfig:
    data: dict[str, Any] = {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")}],
        "routes": [
            {"model": BATCHED, "targets": ["alpha:gpt-4o-mini"], "mode": "batch-api"},
            {"model": LIVE, "targets": ["alpha:gpt-4o-mini"]},
        ],
        "settings": {"concurrency": 8, "retry": {"max_attempts": 2, "base_delay": 0.01, "max_delay": 0.05}},
        "prices": {"gpt-4o-mini": {"input": 1.0, "output": 2.0}},
        "job": {"batch_poll": {"initial": 0.05, "factor": 1.5, "maximum": 0.2}},
    }
    data.update(sections)
    return config_from_dict(data, source="test.yaml")


def _spec(i: int, model: str) -> TaskSpec:
    text = f"Classify the sentiment. Review: item {i} is wonderful"
    body = {"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": text}]}
    return TaskSpec(seq=i, line_no=i + 1, custom_id=f"c{i}", body=body)


async def _store(specs: list[TaskSpec]) -> MemoryJobStore:
    store = MemoryJobStore()
    await store.create_job(job(task_total=len(specs)))
    await store.add_tasks("job1", specs)
    return store


def _batches(emu: Emulator) -> dict[str, int]:
    stats: dict[str, int] = emu.stats()["providers"]["alpha"]["batches"]
    return stats


def _emulator(processing_seconds: float) -> Emulator:
    provider = {
        "name": "alpha",
        "family": "openai",
        "limits": {"rpm": 10**6, "tpm": 10**8},
        "latency": {"ttft_p50_ms": 5, "ttft_sigma": 0.1},
        "batch": {"processing_seconds": processing_seconds},
    }
    return Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]}))


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with _emulator(0.3) as server:
        yield server


@pytest.fixture
async def slow_emu() -> AsyncIterator[Emulator]:
    async with _emulator(30.0) as server:
        yield server


class Events(list[tuple[str, dict[str, Any]]]):
    """The engine's batch events, with a wake-up per event name."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, asyncio.Event] = {}

    def __call__(self, name: str, fields: dict[str, Any]) -> None:
        self.append((name, fields))
        self.seen.setdefault(name, asyncio.Event()).set()

    async def wait(self, name: str) -> None:
        await self.seen.setdefault(name, asyncio.Event()).wait()


def _engine(store: MemoryJobStore, config: GatewayConfig, events: Events) -> JobEngine:
    return JobEngine(
        config, store, "job1", EngineOptions(grace_seconds=1.0), hooks=EngineHooks(on_event=events)
    )


async def test_batch_and_live_routes_finish_in_one_run(emu: Emulator) -> None:
    specs = [_spec(i, BATCHED if i % 2 else LIVE) for i in range(10)]
    store = await _store(specs)
    events = Events()
    engine = _engine(store, _config(emu), events)
    outcome = await engine.run()
    assert (outcome.status, outcome.stop_reason) == ("completed", None)
    counts = await store.counts("job1")
    assert counts[TaskState.SUCCEEDED] == 10
    assert (_batches(emu)["created"], _batches(emu)["requests_succeeded"]) == (1, 5)
    assert emu.stats()["providers"]["alpha"]["admitted"] == 5  # only the live route's tasks
    assert [name for name, _ in events] == ["batch_submitted", "batch_ended"]
    assert events[1][1]["state"] == "completed"
    assert engine.batches is not None
    assert engine.batches.opened_session
    progress = outcome.progress
    assert (progress.succeeded, progress.failed) == (10, 0)
    batch_cost = progress.batch_cost_by_provider["alpha"]
    assert 0 < batch_cost < progress.cost_by_provider["alpha"]
    stats = progress.batches()["stats"]
    assert stats["succeeded"] == 5
    assert stats["cost_usd"] == pytest.approx(batch_cost)
    assert stats["live_cost_usd"] == pytest.approx(2 * batch_cost)


async def test_a_stop_leaves_the_batch_to_the_next_run(slow_emu: Emulator) -> None:
    store = await _store([_spec(i, BATCHED) for i in range(6)])
    events = Events()
    engine = _engine(store, _config(slow_emu), events)
    running = asyncio.ensure_future(engine.run())
    await events.wait("batch_submitted")
    engine.interrupt("interrupted by SIGINT")
    outcome = await running
    assert outcome.stop_reason == "interrupted by SIGINT"
    assert (await store.counts("job1"))[TaskState.PENDING] == 6  # requeued; the batch goes on
    assert _batches(slow_emu)["cancelled"] == 0

    again = Events()
    second = _engine(store, _config(slow_emu), again)
    running = asyncio.ensure_future(second.run())
    await again.wait("batch_resumed")
    assert second.progress.batches()["open"] == 1
    second.request_cancel()  # and cancelling it keeps what it did so far
    outcome = await running
    assert (outcome.status, outcome.stop_reason) == ("stopped", "cancelled")
    assert (_batches(slow_emu)["created"], _batches(slow_emu)["cancelled"]) == (1, 1)
    assert [name for name, _ in again] == ["batch_resumed", "batch_ended"]
    assert again[1][1]["state"] == "cancelled"
    counts = await store.counts("job1")
    assert counts[TaskState.SUCCEEDED] == _batches(slow_emu)["requests_succeeded"]
    assert counts[TaskState.PENDING] == 6 - counts[TaskState.SUCCEEDED]
    assert slow_emu.stats()["providers"]["alpha"]["admitted"] == 0


async def test_batch_tasks_that_do_not_fit_the_budget_go_live(emu: Emulator) -> None:
    store = await _store([_spec(i, BATCHED) for i in range(4)])
    events = Events()
    engine = _engine(store, _config(emu, budget={"max_cost_usd": 1e-9}), events)
    outcome = await engine.run()
    assert outcome.status == "stopped"
    assert outcome.stop_reason is not None
    assert outcome.stop_reason.startswith("budget reached")
    assert _batches(emu)["created"] == 0  # nothing was batched: it could not be paid for
    assert emu.stats()["providers"]["alpha"]["admitted"] == 0
    assert (await store.counts("job1"))[TaskState.PENDING] == 4
