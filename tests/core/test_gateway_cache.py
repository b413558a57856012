"""`Gateway(cache=...)` (issue 43), against the embedded emulator over loopback HTTP: a reusable
request asked twice is sent once, the second answer marked `cached`; a sampled one is sent each
time; an error is never kept."""

from __future__ import annotations

from typing import Any

from batchgate import Gateway
from batchgate.cache.memory import MemoryCacheStore
from batchgate.config import config_from_dict

FAST = {"ttft_p50_ms": 0, "per_token_ms": 0}
CONFIG = config_from_dict(
    {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": "emulator"}],
        "routes": [{"model": "m", "targets": ["alpha:gpt-4o-mini"]}],
        "emulator": {"providers": [{"name": "alpha", "family": "openai", "latency": FAST}]},
    },
    source="test.yaml",
)


def _ask(content: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": content}], **extra}


def _sent(gw: Gateway) -> int:
    assert gw.emulator is not None
    return int(gw.emulator.stats()["providers"]["alpha"]["admitted"])


async def test_a_reusable_request_is_sent_once() -> None:
    store = MemoryCacheStore()
    async with Gateway(CONFIG, cache=store) as gw:
        first = await gw.arun(_ask("hello", temperature=0))
        again = await gw.arun(_ask("hello", temperature=0, custom_id="second"))
        assert first.ok
        assert again.ok
        assert not first.cached
        assert again.cached
        assert again.body == first.body
        assert again.custom_id == "second"
        assert again.attempts == []
        assert _sent(gw) == 1
        await gw.arun(_ask("hello", temperature=0.8))
        await gw.arun(_ask("hello", temperature=0.8))
        assert _sent(gw) == 3  # sampled: each its own draw
        bad = await gw.arun(_ask("x", temperature=0, max_tokens=-1))  # refused, never kept
        assert not bad.ok
    assert (await store.stats()).entries == 1
