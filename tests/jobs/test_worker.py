"""Workers in one process against an in-process emulator (real HTTP on loopback) and the in-memory
store, whose lease clock the test moves: two workers share a job with every task sent once and
the output written once; a worker whose lease was taken over mid-chunk writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from batchgate.config import GatewayConfig, JobSpec, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskSpec, TaskState
from batchgate.jobs.workers.loop import Worker, WorkerOptions
from loopback import serving
from waiting import until

from .factories import ManualWall, job

pytestmark = pytest.mark.integration
MODEL = "m-test"


def _config(emu: Emulator, **provider: Any) -> GatewayConfig:
    return config_from_dict(
        {
            "providers": [{"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha"), **provider}],
            "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
            "settings": {
                "concurrency": 8,
                "retry": {"max_attempts": 2, "base_delay": 0.01, "max_delay": 0.05},
            },
        },
        source="test.yaml",
    )


def _spec(i: int) -> TaskSpec:
    text = f"Classify the sentiment. Review: item {i} is fine"
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": text}]}
    return TaskSpec(seq=i, line_no=i + 1, custom_id=f"c{i}", body=body)


async def _store(n: int, tmp_path: Path, wall: ManualWall) -> MemoryJobStore:
    store = MemoryJobStore(wall=wall)
    record = job(task_total=n)
    options = replace(record.options, workers=True, errors_path=str(tmp_path / "err.jsonl"))
    await store.create_job(replace(record, output_path=str(tmp_path / "out.jsonl"), options=options))
    await store.add_tasks("job1", [_spec(i) for i in range(n)])
    return store


def _emulator(ttft_ms: float, faults: dict[str, float] | None = None) -> Emulator:
    provider: dict[str, Any] = {
        "name": "alpha",
        "family": "openai",
        "limits": {"rpm": 1_000_000, "tpm": 100_000_000},
        "latency": {"ttft_p50_ms": ttft_ms, "ttft_sigma": 0.1},
    }
    if faults:
        provider["faults"] = faults
    return Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]}))


@pytest.fixture
async def fast() -> AsyncIterator[Emulator]:
    async with _emulator(10) as server:
        yield server


@pytest.fixture
async def slow() -> AsyncIterator[Emulator]:
    async with _emulator(300) as server:
        yield server


@pytest.fixture
async def flaky() -> AsyncIterator[Emulator]:
    async with _emulator(10, {"server_error": 0.3}) as server:
        yield server


def _stats(emu: Emulator) -> dict[str, Any]:
    stats: dict[str, Any] = emu.stats()["providers"]["alpha"]
    return stats


async def test_two_workers_send_every_task_once_and_one_writes_the_output(
    fast: Emulator, tmp_path: Path
) -> None:
    n, wall = 60, ManualWall()
    store = await _store(n, tmp_path, wall)
    options = WorkerOptions(chunk_size=4, lanes=2, exit_when_idle=True, idle_min_s=0.01, idle_max_s=0.05)
    workers = [Worker(_config(fast), store, replace(options, owner=f"w{i}")) for i in range(2)]
    totals = await asyncio.gather(*(w.run() for w in workers))
    assert sum(t.committed for t in totals) == n
    assert sum(t.chunks for t in totals) == n // 4
    assert [t.lost for t in totals] == [0, 0]
    assert sum(len(t.finished) for t in totals) == 1
    assert (await store.counts("job1"))[TaskState.SUCCEEDED] == n
    assert (_stats(fast)["admitted"], _stats(fast)["duplicates"]) == (n, 0)
    record = await store.get_job("job1")
    assert record is not None
    assert record.status == "completed"
    lines = (tmp_path / "out.jsonl").read_bytes().splitlines()
    assert len(lines) == n


async def test_a_worker_whose_lease_was_taken_over_writes_nothing(slow: Emulator, tmp_path: Path) -> None:
    wall = ManualWall()
    store = await _store(5, tmp_path, wall)
    # limits declared: a provider nobody declared any for starts with 4 in flight (a slow start)
    config = _config(slow, limits={"rpm": 10**6})
    worker = Worker(config, store, WorkerOptions(chunk_size=5, lanes=1, lease_seconds=30, owner="A"))
    running = asyncio.ensure_future(worker.run())
    try:
        await slow.wait_in_flight("alpha", 5)  # all five sent under A's lease
        wall.advance(31)  # A's lease expires (A is slow, or paused) ...
        thief = await store.claim_chunk("job1", 5, owner="B", lease_seconds=30)  # ... and B takes them
        assert thief is not None
        assert len(thief.tasks) == 5
        await until(lambda: worker.totals.lost == 1, "A to find its lease lost")
    finally:
        worker.stop()
        await running
    assert _stats(slow)["completed"] == 5  # A's answers arrived ...
    assert worker.totals.committed == 0  # ... and the fencing check refused every one of them
    counts = await store.counts("job1")
    assert (counts[TaskState.SUCCEEDED], counts[TaskState.RUNNING]) == (0, 5)  # still B's
    assert worker.totals.finished == []


async def test_a_worker_whose_key_is_refused_stops_and_leaves_every_task_pending(tmp_path: Path) -> None:
    provider = {
        "name": "alpha",
        "family": "openai",
        "limits": {"rpm": 10**6, "tpm": 10**8},
        "api_key": "sk-a",
    }
    async with Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]})) as emu:
        store = await _store(40, tmp_path, ManualWall())
        config = _config(emu, api_key="sk-wrong")
        worker = Worker(config, store, WorkerOptions(chunk_size=8, lanes=2, idle_min_s=0.01, idle_max_s=0.05))
        totals = await worker.run()  # ends by itself: no exit_when_idle needed
        refused = _stats(emu)["rejected"]["auth"]
    assert totals.committed == 0  # no task failed for good: not the tasks' fault
    assert 3 <= refused < 20
    counts = await store.counts("job1")
    assert (counts[TaskState.PENDING], counts[TaskState.FAILED]) == (40, 0)


async def test_a_worker_takes_the_higher_priority_job_s_chunks_first(fast: Emulator, tmp_path: Path) -> None:
    store = MemoryJobStore(wall=ManualWall())
    for job_id, at, priority in (("old-low", 100.0, "low"), ("new-high", 200.0, "high")):
        record = job(job_id, created_at=at, task_total=3)
        out = tmp_path / job_id
        marks = replace(
            record.options, workers=True, spec=JobSpec(priority=priority), errors_path=f"{out}.err"
        )
        await store.create_job(replace(record, output_path=f"{out}.jsonl", options=marks))
        await store.add_tasks(job_id, [_spec(i) for i in range(3)])
    options = WorkerOptions(chunk_size=10, lanes=1, exit_when_idle=True, idle_min_s=0.01, idle_max_s=0.05)
    totals = await Worker(_config(fast), store, options).run()
    assert totals.finished == ["new-high", "old-low"]  # the older low job waited for the high one


async def test_a_job_finished_by_workers_gets_a_full_report(flaky: Emulator, tmp_path: Path) -> None:
    n = 24
    store = await _store(n, tmp_path, ManualWall())
    config = _config(flaky)
    config = replace(
        config, settings=replace(config.settings, retry=replace(config.settings.retry, max_attempts=8))
    )
    options = WorkerOptions(chunk_size=4, lanes=2, exit_when_idle=True, idle_min_s=0.01, idle_max_s=0.05)
    workers = [Worker(config, store, replace(options, owner=f"w{i}")) for i in range(2)]
    await asyncio.gather(*(w.run() for w in workers))
    report = orjson.loads((tmp_path / "out.jsonl.report.json").read_bytes())
    assert (report["status"], report["success_count"]) == ("completed", n)
    assert report["runs"] == 2  # one segment per worker
    assert report["total_elapsed_ms"] > 0
    alpha = report["providers"]["alpha"]
    sent = _stats(flaky)
    assert alpha["success_count"] == n
    assert alpha["request_count"] == alpha["success_count"] + alpha["error_count"] == sent["admitted"]
    assert alpha["errors_by_kind"] == {"server_error": alpha["error_count"]}
    assert report["retries"] == alpha["retries"] == alpha["error_count"] > 0  # every error retried
    assert alpha["latency_ms"]["p50"] > 0


async def test_a_job_finished_by_workers_posts_its_end_to_its_callback(
    fast: Emulator, tmp_path: Path
) -> None:
    got: list[bytes] = []

    async def hook(request: web.Request) -> web.Response:
        got.append(await request.read())
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    async with serving(app) as base:
        store = await _store(3, tmp_path, ManualWall())
        record = await store.get_job("job1")
        assert record is not None
        spec = JobSpec(callback_url=f"{base}/hook")  # no secret named: sent unsigned
        await store.update_job("job1", options=replace(record.options, spec=spec))
        options = WorkerOptions(chunk_size=10, lanes=1, exit_when_idle=True, idle_min_s=0.01, idle_max_s=0.05)
        await Worker(_config(fast), store, options).run()
    [body] = got
    event = orjson.loads(body)
    assert (event["type"], event["data"]) == ("batch.completed", {"id": "job1"})
