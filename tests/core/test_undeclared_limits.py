"""Servers we did not write, in front of providers (issue 38): limits nobody declared are learned
from the first answer's headers with a slow start; LiteLLM's own 429 (`throttling_error`, only
`llm_provider-retry-after`) is a verdict on the rate whose pause is honoured; a relayed upstream
429's prefixed hint is honoured; a server capped at 4 in flight answering a bare 429 never gets
its learned cap cut below what was proven. Real HTTP to `tests/front.py` on a FakeClock."""

from __future__ import annotations

from typing import Any

from batchgate.clock import FakeClock
from batchgate.config import config_from_dict
from batchgate.gateway import Gateway
from clocks import on_fake_time
from front import Front, Reply, throttling

from .conftest import chat


def _config(front: Front, limits: dict[str, Any] | None = None, **settings: Any) -> Any:
    return config_from_dict(
        {
            "providers": [
                {"name": "p", "kind": "openai", "base_url": front.base_url, "limits": limits or {}}
            ],
            "routes": [{"model": "m", "targets": ["p"]}],
            "settings": {"seed": 1, **settings},
        },
        environ={},
    )


async def test_litellm_limits_nobody_declared_are_learned_from_the_first_answer() -> None:
    clock = FakeClock()
    async with Front(clock, rpm=60) as front, Gateway(_config(front), clock=clock) as gw:
        results = await on_fake_time(clock, gw.abatch([chat(f"echo {i}") for i in range(90)]))
        quota = gw.statistics().providers["p"].quota
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    assert front.seen.count(429) == 0  # paced at the 60 a minute its headers report
    assert front.seen.peak <= 8  # a slow start: never hundreds at once at a server we know nothing of
    assert quota is not None
    assert quota.limits_per_minute == {"requests": 60.0}


async def test_litellm_own_429_is_a_rate_verdict_and_its_pause_is_honoured() -> None:
    clock = FakeClock()
    script = lambda i: throttling("60") if i == 2 else None  # noqa: E731
    async with Front(clock, script=script) as front, Gateway(_config(front), clock=clock) as gw:
        results = await on_fake_time(clock, gw.abatch([chat(f"echo {i}") for i in range(12)]))
        rt = gw.runtimes["p"]
    assert all(r.ok for r in results)
    refused = front.seen.arrivals[2]
    later = [t for t in front.seen.arrivals[3:] if t > refused]
    assert later
    assert min(later) >= refused + 60.0
    assert rt.concurrency.cuts == 0  # a rate's 429, not a concurrency refusal
    assert rt.pool.statistics().pauses == 1


async def test_a_relayed_upstream_429s_prefixed_hint_is_honoured() -> None:
    clock = FakeClock()
    relayed = {
        "llm_provider-retry-after": "2",
        "llm_provider-x-ratelimit-limit-requests": "600",
        "llm_provider-x-ratelimit-remaining-requests": "0",
        "llm_provider-x-ratelimit-reset-requests": "2s",
    }
    body = b'{"error": {"message": "upstream: Rate limit reached", "type": "requests", "code": "429"}}'
    script = lambda i: Reply(429, relayed, body) if i == 0 else None  # noqa: E731
    async with Front(clock, script=script) as front, Gateway(_config(front, {"rpm": 600}), clock=clock) as gw:
        result = await on_fake_time(clock, gw.arun(chat("echo")))
    assert result.ok
    first, second = front.seen.arrivals[:2]
    assert second - first >= 2.0  # the 2 s it asked for, not the own backoff


async def test_a_server_capped_at_4_never_has_its_learned_cap_cut_below_what_was_proven() -> None:
    clock = FakeClock()
    # every other connection is counted 10 ms late: requests sent together reach the cap out of
    # order, and one sent with fewer than 4 of ours in flight may be the one turned away
    async with Front(clock, cap=4, late=0.01, latency=0.5) as front:
        start = clock.now()
        async with Gateway(_config(front), clock=clock) as gw:
            results = await on_fake_time(clock, gw.abatch([chat(f"echo {i}") for i in range(80)]))
            rt = gw.runtimes["p"]
        elapsed = clock.now() - start
    assert all(r.ok for r in results)
    assert rt.concurrency.limit is not None
    assert rt.concurrency.limit >= 4  # 4 were proven: never below
    assert front.seen.count(429) <= 8
    assert elapsed < 80 / 4 * 0.5 * 1.5  # near the time at the cap (20 rounds of 0.5 s), not at 1-3
