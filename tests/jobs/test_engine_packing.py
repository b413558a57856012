"""Single-text embedding lines packed many to a request (issue 29), against an in-process emulator
(real HTTP on loopback): each line gets its own vector and its share of the usage and the bill,
lines that differ in anything but their text are never packed together, a pack refused for one bad
text is halved until that text fails alone, and a pack cut off mid-flight leaves its lines pending
for the next run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, embedding_vector, emulator_config_from_dict
from batchgate.endpoints import ENDPOINT_KEY
from batchgate.errors import ConfigError
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import EngineHost, EngineOptions
from batchgate.jobs.pack.group import shares
from batchgate.jobs.plan import make_plan
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskRecord, TaskSpec, TaskState
from batchgate.tokens import ExactTokenCounter

from .factories import job

MODEL = "embed"
PRICE = 20.0  # USD per million input tokens


def _emulator(**fields: Any) -> Emulator:
    provider = {"name": "alpha", "family": "openai", "limits": {"rpm": 1_000_000, "tpm": 100_000_000}}
    provider["latency"] = {"ttft_p50_ms": 5, "ttft_sigma": 0.1}
    provider.update(fields)
    return Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]}))


def _config_data() -> dict[str, Any]:
    return {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
        "routes": [{"model": MODEL, "targets": ["alpha:text-embedding-3-small"]}],
        "settings": {"concurrency": 8, "retry": {"max_attempts": 2, "base_delay": 0.01, "max_delay": 0.05}},
        "prices": {"text-embedding-3-small": {"input": PRICE, "output": 0.0}},
    }


def _config() -> GatewayConfig:
    return config_from_dict(_config_data(), source="test.yaml")


def _text(i: int) -> str:
    return f"document {i}: " + "lorem ipsum " * (i % 7 + 1)


def _spec(i: int, **fields: Any) -> TaskSpec:
    body = {ENDPOINT_KEY: "embeddings", "model": MODEL, "input": _text(i), **fields}
    return TaskSpec(seq=i, line_no=i + 1, custom_id=f"c{i}", body=body)


async def _store(specs: list[TaskSpec]) -> MemoryJobStore:
    store = MemoryJobStore()
    await store.create_job(job(task_total=len(specs)))
    await store.add_tasks("job1", specs)
    return store


def _engine(store: MemoryJobStore, emu: Emulator, **opts: Any) -> JobEngine:
    options = EngineOptions(**opts)
    return JobEngine(
        _config(), store, "job1", options, host=EngineHost(base_urls={"alpha": emu.base_url("alpha")})
    )


async def _records(store: MemoryJobStore) -> dict[str, TaskRecord]:
    return {r.custom_id: r async for r in store.iter_results("job1", ordered=True)}


def _prompt_tokens(rec: TaskRecord) -> int:
    assert rec.output_line is not None
    return int(orjson.loads(rec.output_line)["usage"]["prompt_tokens"])


def _body(rec: TaskRecord) -> dict[str, Any]:
    assert rec.output_line is not None
    body: dict[str, Any] = orjson.loads(rec.output_line)["response"]["body"]
    return body


async def test_each_line_gets_its_own_vector_and_its_share_of_usage_and_cost() -> None:
    specs = [_spec(i, dimensions=8 if i % 2 else 16) for i in range(600)]
    specs.append(
        TaskSpec(seq=600, line_no=601, custom_id="many", body={**_spec(0).body, "input": ["x", "y"]})
    )
    async with _emulator() as emu:
        store = await _store(specs)
        outcome = await _engine(store, emu).run()
        stats = emu.stats()["providers"]["alpha"]
    assert outcome.status == "completed"
    records = await _records(store)
    assert all(r.state is TaskState.SUCCEEDED for r in records.values())
    # 300 lines of each size, at most half the engine's 1,024-line window a pack, and the list alone
    assert stats["admitted"] <= 2 * 2 + 2
    count = ExactTokenCounter().count_text
    for i in range(600):
        rec = records[f"c{i}"]
        body = _body(rec)
        assert body["object"] == "list"
        assert [d["index"] for d in body["data"]] == [0]
        assert body["data"][0]["embedding"] == embedding_vector(_text(i), 8 if i % 2 else 16), i
        assert body["usage"]["prompt_tokens"] == _prompt_tokens(rec) > 0
        assert rec.cost_usd == pytest.approx(_prompt_tokens(rec) * PRICE / 1e6)
    assert [d["embedding"] for d in _body(records["many"])["data"]] == [
        embedding_vector(t, 1536) for t in "xy"
    ]
    # the shares add up to what the provider counted for every text
    assert sum(map(_prompt_tokens, records.values())) == sum(count(_text(i)) for i in range(600)) + 2
    assert outcome.progress.cost_usd == pytest.approx(sum(r.cost_usd for r in records.values()))


async def test_a_pack_refused_for_one_text_is_halved_until_that_text_fails_alone() -> None:
    specs = [_spec(i) for i in range(20)]
    specs[13] = _spec(13, input="word " * 9000)  # over the 8,192 tokens one input may hold
    async with _emulator() as emu:
        store = await _store(specs)
        outcome = await _engine(store, emu).run()
    assert outcome.status == "completed"
    records = await _records(store)
    assert records["c13"].state is TaskState.FAILED
    assert records["c13"].error is not None
    assert "maximum context length" in records["c13"].error
    ok = [r for cid, r in records.items() if cid != "c13"]
    assert all(r.state is TaskState.SUCCEEDED for r in ok)
    assert all(_body(r)["data"][0]["embedding"] == embedding_vector(_text(r.seq), 1536) for r in ok)


async def test_a_pack_cut_off_in_flight_leaves_its_lines_pending_for_the_next_run() -> None:
    specs = [_spec(i) for i in range(30)]
    async with _emulator(faults={"hang": 1.0}) as emu:
        store = await _store(specs)
        engine = _engine(store, emu, grace_seconds=3600.0)
        runner = asyncio.ensure_future(engine.run())
        await emu.wait_hanging("alpha", 1)  # one pack holds all 30 lines
        engine.interrupt("interrupted by SIGINT")
        await asyncio.sleep(0)
        assert not runner.done()  # the grace period waits for the lines on the wire with their pack
        engine.interrupt("interrupted by SIGINT")
        await runner
    assert (await store.counts("job1"))[TaskState.PENDING] == 30
    async with _emulator() as emu:
        outcome = await _engine(store, emu).run()
    assert outcome.status == "completed"
    records = await _records(store)
    assert all(
        _body(r)["data"][0]["embedding"] == embedding_vector(_text(r.seq), 1536) for r in records.values()
    )


def test_shares_add_up_and_follow_the_weights() -> None:
    assert shares(10, [1, 1, 1]) == [4, 3, 3]
    assert shares(100, [3, 1]) == [75, 25]
    assert sum(shares(7, [5, 0, 2, 9])) == 7
    assert shares(5, [0, 0]) in ([3, 2], [2, 3])
    assert shares(0, []) == []


async def test_pack_embeddings_zero_sends_each_line_on_its_own() -> None:
    specs = [_spec(i) for i in range(12)]
    config = config_from_dict({**_config_data(), "job": {"pack_embeddings": 0}}, source="test.yaml")
    async with _emulator() as emu:
        store = await _store(specs)
        engine = JobEngine(config, store, "job1", host=EngineHost(base_urls={"alpha": emu.base_url("alpha")}))
        outcome = await engine.run()
        admitted = emu.stats()["providers"]["alpha"]["admitted"]
    assert outcome.status == "completed"
    assert admitted == 12


def test_pack_embeddings_is_checked_in_the_config() -> None:
    with pytest.raises(ConfigError, match=r"job\.pack_embeddings: must be at most 2048"):
        config_from_dict({**_config_data(), "job": {"pack_embeddings": 4096}}, source="test.yaml")
    with pytest.raises(ConfigError, match=r"job\.pack_embeddings: must be >= 0"):
        config_from_dict({**_config_data(), "job": {"pack_embeddings": -1}}, source="test.yaml")


def test_the_plan_counts_packed_requests_not_lines(tmp_path: Path) -> None:
    data = _config_data()
    data["providers"][0]["limits"] = {"rpm": 3000, "tpm": 1_000_000}
    src = tmp_path / "in.jsonl"
    lines = [
        {
            "custom_id": f"e{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": MODEL, "input": _text(i)},
        }
        for i in range(2_048)
    ]
    src.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    packed = make_plan(config_from_dict(data, source="t.yaml"), src)["providers"]["alpha"]
    alone = make_plan(config_from_dict({**data, "job": {"pack_embeddings": 0}}, source="t.yaml"), src)
    assert alone["providers"]["alpha"]["requests"] == 2_048
    assert packed["requests"] == 4  # 512 a request: half the engine's 1,024-line window (concurrency 8)
    assert packed["prompt_tokens"] == alone["providers"]["alpha"]["prompt_tokens"]
