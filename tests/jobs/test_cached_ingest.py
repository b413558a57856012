"""A re-run answered from the response cache, stored behind the reading against a real SQLite job
store: the cache's answers go in as finished tasks (never claimed), a run that died after its
first chunk is continued by the next, each task stored once, and the misses alone stay pending."""

from __future__ import annotations

from pathlib import Path

import orjson

from batchgate.cache.entry import CacheEntry
from batchgate.cache.memory import MemoryCacheStore
from batchgate.clock import LoopClock
from batchgate.config import GatewayConfig, config_from_dict
from batchgate.jobs.cache.cached import JobCache
from batchgate.jobs.ingest import FIRST_CHUNK
from batchgate.jobs.input_stream import end_ingest, set_up_job
from batchgate.jobs.job_setup import RunRequest
from batchgate.jobs.store.protocol import TaskState
from batchgate.jobs.store.sqlite import SqliteJobStore

N = FIRST_CHUNK * 3 + 7
MISSES = {5, FIRST_CHUNK + 1, N - 1}  # not in the cache


def _config() -> GatewayConfig:
    return config_from_dict(
        {
            "providers": [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
            "routes": [{"model": "m", "targets": ["alpha"]}],
        },
        source="test.yaml",
    )


def _body(i: int) -> dict[str, object]:
    return {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": f"item {i}"}]}


async def _filled(config: GatewayConfig) -> JobCache:
    cache = JobCache(MemoryCacheStore(), config)
    assert cache.store is not None
    entries = {}
    for i in range(N):
        key = cache.key_of(_body(i))
        if i not in MISSES and key is not None:
            entries[key] = CacheEntry.of({"answer": i}, 3, 1, 0.5, "alpha").dump()
    await cache.store.put_many(entries)
    return cache


async def test_a_cached_rerun_killed_after_its_first_chunk_is_continued(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"custom_id": f"t{i}", **_body(i)}) + b"\n" for i in range(N)))
    config = _config()
    cache = await _filled(config)
    req = RunRequest(src, tmp_path / "gw.yaml", tmp_path / "out.jsonl", cache=cache)
    store = await SqliteJobStore.open(tmp_path / "jobs.db")
    try:
        _, ingest = await set_up_job(store, "job1", req, config, LoopClock(), print)
        assert ingest is not None
        counts = await store.counts("job1")
        assert (counts[TaskState.SUCCEEDED], counts[TaskState.PENDING]) == (FIRST_CHUNK - 1, 1)  # died here

        _, ingest = await set_up_job(store, "job1", req, config, LoopClock(), print)
        assert ingest is not None
        appended: list[int] = []
        ingest.on_done = lambda outcomes: appended.extend(o.seq for o in outcomes)
        assert await ingest.run()
        await end_ingest(store, "job1", ingest, req, config, print)
        records = [r async for r in store.iter_results("job1", ordered=True)]
        assert [r.seq for r in records] == list(range(N))  # each task stored once
        pending = {r.seq for r in records if r.state is TaskState.PENDING}
        assert pending == MISSES
        done = [r for r in records if r.state is TaskState.SUCCEEDED]
        assert all(orjson.loads(r.output_line or b"{}")["cached"] is True for r in done)
        assert sorted(appended) == [i for i in range(FIRST_CHUNK, N) if i not in MISSES]  # OUT: once each
        assert cache.figures.hits == N - len(MISSES)
    finally:
        await store.close()
