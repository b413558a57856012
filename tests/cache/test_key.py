"""Cache keys: key order, whitespace and batchgate's own fields do not change a key; the model,
the provider kind, the endpoint, the body and the scope (a tenant) do."""

from __future__ import annotations

import orjson

from batchgate.cache.key import cache_key, reusable
from batchgate.endpoints import ENDPOINT_KEY
from batchgate.request_fields import TASK_METADATA

BODY = {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}


def test_order_whitespace_and_own_fields_do_not_matter() -> None:
    text = '{ "messages": [ {"content": "hi", "role": "user"} ],\n "temperature": 0, "model": "m" }'
    reordered = orjson.loads(text)
    with_own = {**BODY, "custom_id": "x", TASK_METADATA: {"row": 3}, ENDPOINT_KEY: "chat"}
    assert cache_key(BODY, "openai") == cache_key(reordered, "openai") == cache_key(with_own, "openai")


def test_what_changes_the_answer_changes_the_key() -> None:
    base = cache_key(BODY, "openai")
    assert cache_key({**BODY, "model": "n"}, "openai") != base
    assert cache_key(BODY, "anthropic") != base
    assert cache_key({**BODY, "temperature": 0.5}, "openai") != base
    assert cache_key({**BODY, ENDPOINT_KEY: "responses"}, "openai") != base
    assert cache_key(BODY, "openai", scope="tenant-b") != cache_key(BODY, "openai", scope="tenant-a")


def test_reusable_when_deterministic_or_asked() -> None:
    assert reusable(BODY, "deterministic")
    assert reusable({"model": "m", "seed": 7}, "deterministic")
    sampled = {"model": "m", "temperature": 0.7}
    assert not reusable(sampled, "deterministic")
    assert reusable(sampled, "always")
    assert not reusable({**sampled, "n": 3}, "always")
