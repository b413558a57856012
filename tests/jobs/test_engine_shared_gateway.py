"""Several engines on one started gateway (`batchgate serve`): every job draws from the same
provider runtimes (one quota pool), the gateway outlives the runs, and one job's stop or cancel
leaves the other jobs' requests alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.gateway import Gateway
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import EngineHooks, EngineHost, EngineOptions
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskSpec, TaskState

from .factories import job

MODEL = "m-test"
pytestmark = pytest.mark.integration


def _config() -> GatewayConfig:
    data: dict[str, Any] = {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "settings": {"concurrency": 8, "retry": {"max_attempts": 2, "base_delay": 0.01, "max_delay": 0.05}},
    }
    return config_from_dict(data, source="test.yaml")


def _spec(job_id: str, i: int) -> TaskSpec:
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": f"{job_id} item {i}"}]}
    return TaskSpec(seq=i, line_no=i + 1, custom_id=f"c{i}", body=body)


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    provider = {"name": "alpha", "family": "openai", "limits": {"rpm": 1_000_000, "tpm": 100_000_000}}
    provider["latency"] = {"ttft_p50_ms": 50, "ttft_sigma": 0.2}
    async with Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]})) as server:
        yield server


async def _store(jobs: dict[str, int]) -> MemoryJobStore:
    store = MemoryJobStore()
    for job_id, n in jobs.items():
        await store.create_job(job(job_id, task_total=n))
        await store.add_tasks(job_id, [_spec(job_id, i) for i in range(n)])
    return store


async def test_two_jobs_share_one_gateway_and_one_s_cancel_spares_the_other(emu: Emulator) -> None:
    store = await _store({"job1": 30, "job2": 30})
    config = _config()
    async with Gateway(config, base_urls={"alpha": emu.base_url("alpha")}) as gateway:
        heard: list[str] = []

        def cancel_at_five(spec: TaskSpec, _: object) -> None:  # job2 stops mid-run, sending
            heard.append(spec.custom_id)
            if len(heard) == 5:
                engines["job2"].request_cancel()

        engines = {
            j: JobEngine(
                config,
                store,
                j,
                EngineOptions(grace_seconds=0.5),
                hooks=EngineHooks(on_result=cancel_at_five if j == "job2" else None),
                host=EngineHost(gateway=gateway),
            )
            for j in ("job1", "job2")
        }
        runs = {j: asyncio.ensure_future(e.run()) for j, e in engines.items()}
        one, two = await runs["job1"], await runs["job2"]
        assert engines["job1"].gateway is None  # the run let go of it ...
        after = await gateway.arun(_spec("after", 0).body)
        assert after.ok  # ... without closing it
        stats = gateway.statistics()
    assert (one.status, two.status) == ("completed", "stopped")
    done1, done2 = await store.counts("job1"), await store.counts("job2")
    assert done1[TaskState.SUCCEEDED] == 30
    assert 5 <= done2[TaskState.SUCCEEDED] < 30
    assert done2[TaskState.PENDING] == 30 - done2[TaskState.SUCCEEDED]  # what it never finished goes back
    # one runtime served both jobs: its counter holds every answer of either
    assert stats.providers["alpha"].succeeded == 30 + done2[TaskState.SUCCEEDED] + 1
    assert emu.stats()["providers"]["alpha"]["duplicates"] == 0
