"""The hot paths of a re-run answered from the cache give what the general paths give: a hit's OUT
line built from the entry's bytes is `format_success_line`'s, byte for byte, and the prompt bound of
a plain chat line (no generator) is the general sum."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.cache.entry import CacheEntry
from batchgate.cache.memory import MemoryCacheStore
from batchgate.config import config_from_dict
from batchgate.jobs.cache.cached import JobCache, cached_outcome
from batchgate.jobs.cache.cached_line import hit_head, plain_hit_line
from batchgate.jobs.fits import prompt_upper_bound
from batchgate.jobs.store.protocol import TaskSpec
from batchgate.request_fields import TASK_METADATA
from batchgate.tokens import chat_framing, iter_prompt_text, token_array_tokens

IDS = ["t1", 'quo"te\\back', "ünï\u2028code\U0001f600", "ctl\x01\n\t", "x" * 512]
ANSWER = {"id": "c1", "choices": [{"index": 0, "message": {"role": "assistant", "content": 'é\n"x"'}}]}


def _spec(seq: int, custom_id: str, **extra: Any) -> TaskSpec:
    body = {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": f"q {seq}"}]}
    return TaskSpec(seq, seq + 1, custom_id, body | extra)


@pytest.mark.parametrize("provider", ["alpha", None, "prövïder"])
@pytest.mark.parametrize("custom_id", IDS)
def test_a_plain_hit_line_is_the_general_line(custom_id: str, provider: str | None) -> None:
    data = CacheEntry.of(ANSWER, 12, 4, 0.25, provider, 3).dump()
    (prompt, completion, cached, _, given), body = hit_head(data)
    line = plain_hit_line(custom_id, body, prompt, completion, cached, given)
    assert line == cached_outcome(_spec(0, custom_id), CacheEntry.load(data)).output_line


def test_odd_figures_take_the_general_path() -> None:
    assert plain_hit_line("t", b"{}", 1.5, 2, 0, "a") is None
    assert plain_hit_line("t", b"{}", True, 2, 0, "a") is None
    assert plain_hit_line("t", b"{}", 1, 2, 0, 7) is None


async def test_split_gives_the_outcomes_cached_outcome_gives() -> None:
    config = config_from_dict(
        {
            "providers": [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:1/v1"}],
            "routes": [{"model": "m", "targets": ["alpha"]}],
        },
        source="test",
    )
    cache = JobCache(MemoryCacheStore(), config)
    specs = [_spec(i, cid) for i, cid in enumerate(IDS)]
    specs.append(_spec(len(specs), "meta", **{TASK_METADATA: {"row": 7}}))
    specs.append(_spec(len(specs), "miss"))
    entries = {}
    for spec in specs[:-1]:
        key = cache.key_of(spec.body)
        assert key is not None
        entries[key] = CacheEntry.of(ANSWER | {"n": spec.seq}, 12, spec.seq, 0.5, "alpha").dump()
    assert cache.store is not None
    await cache.store.put_many(entries)
    hits, misses = await cache.split(specs)
    assert [s.custom_id for s in misses] == ["miss"]
    for spec, outcome in hits:
        key = cache.key_of(spec.body)
        assert key is not None
        assert outcome == cached_outcome(spec, CacheEntry.load(entries[key]))
    assert b'"row":7' in hits[-1][1].output_line
    assert cache.figures.hits == len(IDS) + 1
    assert cache.figures.saved_usd == pytest.approx(0.5 * (len(IDS) + 1))


BODIES: list[dict[str, Any]] = [
    {"messages": [{"role": "user", "content": "héllo"}, {"role": "assistant", "content": None}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "part"}]}]},
    {"system": "be brief", "messages": [{"role": "user", "content": "x"}]},
    {"prompt": [1, 2, 3], "messages": [{"role": "user", "content": "x"}]},
    {"messages": ["not an object", {"role": "user", "content": "y"}]},
    {"messages": []},
    {"input": "text only"},
]


@pytest.mark.parametrize("body", BODIES)
def test_the_plain_prompt_bound_is_the_general_sum(body: dict[str, Any]) -> None:
    chars = sum(len(part) for part in iter_prompt_text(body))
    assert prompt_upper_bound(body) == 4 * chars + token_array_tokens(body) + chat_framing(body)
