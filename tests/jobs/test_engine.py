"""The job engine against an in-process emulator (real HTTP on loopback) and the in-memory store:
completion, stop and resume without resending, the quota-exhausted stop, the budget, the grace
period cut short by a second interrupt, and validation rounds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import EngineHost, EngineOptions
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskSpec, TaskState

from .factories import job

MODEL = "m-test"


def _emulator(**fields: Any) -> Emulator:
    provider = {"name": "alpha", "family": "openai", "limits": {"rpm": 1_000_000, "tpm": 100_000_000}}
    provider["latency"] = {"ttft_p50_ms": 20, "ttft_sigma": 0.2}
    provider.update(fields)
    return Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]}))


def _config(**sections: Any) -> GatewayConfig:
    data: dict[str, Any] = {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "settings": {
            "concurrency": 8,
            "retry": {"max_attempts": 2, "base_delay": 0.01, "max_delay": 0.05},
            # One send a request: what reached the emulator is counted (on a loaded machine a
            # latency outlier at the tail would be hedged, a second send of the same task).
            "timeouts": {"hedge": False},
        },
        "prices": {"gpt-4o-mini": {"input": 1000.0, "output": 1000.0}},  # $0.001 a token
    }
    data.update(sections)
    return config_from_dict(data, source="test.yaml")


def _spec(i: int, mood: str = "fine") -> TaskSpec:
    text = f"Classify the sentiment. Review: item {i} is {mood}"
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": text}]}
    return TaskSpec(seq=i, line_no=i + 1, custom_id=f"c{i}", body=body)


async def _store(specs: list[TaskSpec]) -> MemoryJobStore:
    store = MemoryJobStore()
    await store.create_job(job(task_total=len(specs)))
    await store.add_tasks("job1", specs)
    return store


def _engine(store: MemoryJobStore, emu: Emulator, config: GatewayConfig, **opts: Any) -> JobEngine:
    return JobEngine(
        config,
        store,
        "job1",
        EngineOptions(**opts),
        host=EngineHost(base_urls={"alpha": emu.base_url("alpha")}),
    )


def _stats(emu: Emulator) -> dict[str, Any]:
    stats: dict[str, Any] = emu.stats()["providers"]["alpha"]
    return stats


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with _emulator() as server:
        yield server


async def test_runs_every_task_once(emu: Emulator) -> None:
    store = await _store([_spec(i) for i in range(40)])
    engine = _engine(store, emu, _config())
    outcome = await engine.run()
    assert outcome.status == "completed"
    assert engine.batches is not None
    assert not engine.batches.opened_session
    assert outcome.stop_reason is None
    counts = await store.counts("job1")
    assert counts[TaskState.SUCCEEDED] == 40
    assert _stats(emu)["admitted"] == 40
    assert _stats(emu)["duplicates"] == 0
    assert outcome.progress.succeeded == 40
    assert outcome.progress.in_flight == 0
    totals = await store.totals("job1")
    assert totals["cost_usd"] == pytest.approx((totals["prompt_tokens"] + totals["completion_tokens"]) / 1000)


async def test_stop_requeues_unfinished_and_resume_sends_no_success_again(emu: Emulator) -> None:
    store = await _store([_spec(i) for i in range(60)])
    engine = _engine(store, emu, _config())
    runner = asyncio.ensure_future(engine.run())
    await emu.wait_in_flight("alpha", 8)
    engine.request_stop("test stop")
    outcome = await runner
    assert outcome.status == "stopped"
    assert outcome.stop_reason == "test stop"
    counts = await store.counts("job1")
    assert counts[TaskState.RUNNING] == 0  # nothing stays claimed
    done = counts[TaskState.SUCCEEDED]
    assert done == _stats(emu)["completed"]  # the grace period let the in-flight answers land
    assert 0 < done < 60
    assert counts[TaskState.PENDING] == 60 - done
    admitted = _stats(emu)["admitted"]

    again = await _engine(store, emu, _config()).run()
    assert again.status == "completed"
    assert (await store.counts("job1"))[TaskState.SUCCEEDED] == 60
    assert _stats(emu)["duplicates"] == 0
    assert _stats(emu)["admitted"] - admitted == 60 - done


async def test_quota_exhausted_stops_and_leaves_the_task_pending() -> None:
    async with _emulator(faults={"insufficient_quota": 1.0}) as emu:
        store = await _store([_spec(i) for i in range(20)])
        outcome = await _engine(store, emu, _config()).run()
    assert outcome.status == "stopped"
    assert outcome.stop_reason is not None
    assert "refused" in outcome.stop_reason
    counts = await store.counts("job1")
    assert counts[TaskState.FAILED] == 0  # not the items' fault
    assert counts[TaskState.RUNNING] == 0
    assert counts[TaskState.PENDING] == 20


async def test_budget_stops_before_passing_it(emu: Emulator) -> None:
    store = await _store([_spec(i) for i in range(50)])
    config = _config(budget={"max_cost_usd": 0.3})
    outcome = await _engine(store, emu, config).run()
    assert outcome.status == "stopped"
    assert outcome.stop_reason is not None
    assert outcome.stop_reason.startswith("budget reached")
    totals = await store.totals("job1")
    assert 0 < totals["cost_usd"] <= 0.3
    done = (await store.counts("job1"))[TaskState.SUCCEEDED]
    assert 0 < done < 50
    assert _stats(emu)["admitted"] == done  # no call was made that the budget could not hold

    # the next run starts from what was spent: it stops at once without sending anything
    again = await _engine(store, emu, config).run()
    assert again.status == "stopped"
    assert _stats(emu)["admitted"] == done


async def test_second_interrupt_ends_the_grace_period() -> None:
    async with _emulator(faults={"hang": 1.0}) as emu:
        store = await _store([_spec(i) for i in range(4)])
        engine = _engine(store, emu, _config(), grace_seconds=3600.0)
        runner = asyncio.ensure_future(engine.run())
        await emu.wait_hanging("alpha", 4)
        engine.interrupt("interrupted by SIGINT")
        await asyncio.sleep(0)
        assert not runner.done()  # in the grace period: the hanging calls may still answer
        engine.interrupt("interrupted by SIGINT")
        outcome = await runner
    assert outcome.stop_reason == "interrupted by SIGINT"
    counts = await store.counts("job1")
    assert counts[TaskState.PENDING] == 4  # cut short: nothing failed, all will be sent again


async def test_invalid_answers_are_retried_then_failed_as_invalid(emu: Emulator) -> None:
    specs = [_spec(0, "wonderful"), _spec(1, "blue")]  # the emulator answers positive, then neutral
    store = await _store(specs)
    config = _config(job={"validate_regex": "positive|negative", "validation_attempts": 3})
    outcome = await _engine(store, emu, config).run()
    assert outcome.status == "completed"
    records = {r.custom_id: r async for r in store.iter_results("job1", ordered=True)}
    assert records["c0"].state is TaskState.SUCCEEDED
    assert records["c0"].attempts == 1
    assert records["c1"].state is TaskState.FAILED
    assert records["c1"].attempts == 3
    assert records["c1"].error is not None
    assert records["c1"].error.startswith("invalid_output")
    assert outcome.progress.invalid_ids == ["c1"]
    assert outcome.progress.validation_tokens > 0
    assert _stats(emu)["admitted"] == 4
