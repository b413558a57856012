"""`JobCache` on its own, over a memory store: only succeeded answers of reusable requests are
kept (errors never, sampled requests never), a chunk's hits come back with their outcomes marked
`cached` (nothing spent), and a tenant's scope never reads another's answers."""

from __future__ import annotations

import orjson

from batchgate.cache.memory import MemoryCacheStore
from batchgate.config import config_from_dict
from batchgate.errors import ServerError
from batchgate.jobs.cache.cached import JobCache
from batchgate.jobs.store.protocol import TaskSpec, TaskState
from batchgate.models import Result, Usage

CONFIG = config_from_dict(
    {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
        "routes": [{"model": "m", "targets": ["alpha"]}],
    },
    source="test.yaml",
)
ANSWER = {"object": "chat.completion", "choices": [{"message": {"role": "assistant", "content": "hi"}}]}


def _spec(seq: int, **extra: object) -> TaskSpec:
    body = {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "q"}], **extra}
    return TaskSpec(seq, seq + 1, f"c{seq}", body)


async def test_succeeded_answers_are_kept_and_found_marked_cached() -> None:
    store = MemoryCacheStore()
    cache = JobCache(store, CONFIG)
    cache.remember(_spec(0), Result(0, True, ANSWER, provider="alpha", usage=Usage(7, 2)), 0.5)
    await cache.flush()
    hits, misses = await cache.split([_spec(1), _spec(2, temperature=0.9)])
    assert [m.seq for m in misses] == [2]
    [(spec, outcome)] = hits
    assert spec.seq == 1
    line = orjson.loads(outcome.output_line)
    assert line["cached"] is True
    assert line["custom_id"] == "c1"
    assert line["response"]["body"] == ANSWER
    assert line["usage"]["prompt_tokens"] == 7
    assert (outcome.state, outcome.cost_usd, outcome.attempts) == (TaskState.SUCCEEDED, 0.0, 0)
    assert cache.figures.hits == 1
    assert cache.figures.saved_usd == 0.5


async def test_errors_and_sampled_requests_are_never_kept() -> None:
    store = MemoryCacheStore()
    cache = JobCache(store, CONFIG)
    failed = Result(0, False, None, error=ServerError("boom", status=500), provider="alpha")
    cache.remember(_spec(0), failed, 0.0)
    cache.remember(_spec(1, temperature=0.7), Result(1, True, ANSWER, provider="alpha"), 0.1)
    await cache.flush()
    assert (await store.stats()).entries == 0


async def test_tenants_never_read_each_others_answers() -> None:
    store = MemoryCacheStore()
    tenant_a = JobCache(store, CONFIG, scope="tenant-a")
    tenant_b = JobCache(store, CONFIG, scope="tenant-b")
    tenant_a.remember(_spec(0), Result(0, True, ANSWER, provider="alpha"), 0.1)
    await tenant_a.flush()
    hits, _ = await tenant_b.split([_spec(0)])
    assert hits == []
    hits, _ = await tenant_a.split([_spec(0)])
    assert len(hits) == 1
