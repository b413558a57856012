"""A provider that settles the output charge to the real output when the answer ends (Anthropic's
OTPM, shared/PROTOCOLS.md): the pool gives the unused `max_tokens` back whatever it knows of the
enforcement, holds a second of output for the requests in flight, and is told so by the config."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.config import config_from_dict
from batchgate.errors import ConfigError
from batchgate.models import Cost, Usage
from batchgate.quota.pool import QuotaLimits, QuotaPool

OTPM = 60_000  # 1,000 output tokens per second
MAX_TOKENS = 300  # the answers use 20 of them


def _pool(*, adjusted: bool, burst: float | None = None) -> tuple[QuotaPool, FakeClock]:
    clock = FakeClock()
    pool = QuotaPool("claude", QuotaLimits(otpm=OTPM, safety=1.0, burst_seconds=burst), clock)
    pool.settles_output(adjusted)
    return pool, clock


def _answered(pool: QuotaPool, clock: FakeClock, requests: int, latency: float) -> float:
    """Send `requests` one after another as the pool admits them, each answering `latency`
    seconds later with 20 output tokens; the seconds it took."""
    start = clock.now()
    for _ in range(requests):
        res = pool.try_acquire(Cost(output_tokens=MAX_TOKENS))
        while res is None:
            clock.advance(max(0.01, pool.wait_estimate(Cost(output_tokens=MAX_TOKENS))))
            res = pool.try_acquire(Cost(output_tokens=MAX_TOKENS))
        clock.advance(latency)
        pool.reconcile(res, Usage(completion_tokens=20))
    return clock.now() - start


@pytest.mark.parametrize("burst", [None, 1.0])
def test_an_adjusting_provider_is_paced_by_the_real_output_not_max_tokens(burst: float | None) -> None:
    kept, kept_clock = _pool(adjusted=False, burst=burst)
    adjusted, clock = _pool(adjusted=True, burst=burst)
    # kept: 300 a request at 1,000/s, 0.3 s each; settled: 20 a request, the latency binds
    assert _answered(kept, kept_clock, 20, 0.1) > 20 * 0.25
    assert _answered(adjusted, clock, 20, 0.1) < 20 * 0.15
    stats = adjusted.statistics()
    assert stats.levels["output_tokens"] > 0  # no debt left: only 20 a request stayed charged


def test_the_unused_output_comes_back_although_the_enforcement_is_unknown() -> None:
    pool, _ = _pool(adjusted=True)  # no burst_seconds: the prompt credit is limited, output is not
    res = pool.try_acquire(Cost(tokens=MAX_TOKENS + 50, input_tokens=50, output_tokens=MAX_TOKENS))
    assert res is not None
    before = res.charged["output_tokens"]
    pool.reconcile(res, Usage(prompt_tokens=50, completion_tokens=20))
    assert before == MAX_TOKENS
    assert res.charged["output_tokens"] == 20


def test_an_adjusting_pool_holds_one_second_of_output_for_the_requests_in_flight() -> None:
    pool, _ = _pool(adjusted=True)
    assert pool.statistics().capacities["output_tokens"] == pytest.approx(OTPM / 60)
    pool.settles_output(False)  # learned to be kept: no burst until the provider shows one
    assert pool.statistics().capacities["output_tokens"] == 0.0


def _provider(**extra: object) -> dict[str, object]:
    entry: dict[str, object] = {"name": "p", "base_url": "http://x", "api_key": "k", **extra}
    return {"providers": [entry], "routes": [{"model": "m", "targets": ["p"]}]}


def test_output_charge_and_burst_seconds_are_read_from_the_config() -> None:
    anthropic = config_from_dict(_provider(kind="anthropic", limits={"otpm": 100, "burst_seconds": 60}))
    assert anthropic.providers[0].output_adjusted  # Anthropic documents it
    assert anthropic.providers[0].limits.burst_seconds == 60.0
    assert not config_from_dict(_provider(kind="openai")).providers[0].output_adjusted
    kept = config_from_dict(_provider(kind="anthropic", output_charge="max_tokens"))
    assert not kept.providers[0].output_adjusted
    assert config_from_dict(_provider(output_charge="adjusted")).providers[0].output_adjusted


@pytest.mark.parametrize(
    ("extra", "key", "reason"),
    [
        ({"output_charge": "refunded"}, "providers[0].output_charge", "max_tokens, adjusted"),
        ({"limits": {"burst_seconds": 0}}, "providers[0].limits.burst_seconds", "> 0"),
        ({"limits": {"burst_seconds": 90}}, "providers[0].limits.burst_seconds", "at most 60"),
    ],
)
def test_bad_output_charge_or_burst_names_the_key(extra: dict[str, object], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(_provider(**extra))
    assert key in str(info.value)
    assert reason in str(info.value)
