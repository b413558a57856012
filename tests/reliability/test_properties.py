"""Properties of the whole attempt loop (scheduler + retry policy + quota pool + breaker), on a
FakeClock with a scripted client: whatever sequence of failures a provider answers with, a
request is tried at most max_attempts times, stops at the first never-retried error, never
sleeps past max_delay nor pauses the provider past max_hint, and every reservation it made
settles so the pool's buckets return to full. (The policy alone and the pool alone have their
own properties in tests/policy and tests/quota.)"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchgate.clock import FakeClock
from batchgate.config import ProviderConfig
from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    ConnectError,
    HTTPStatusError,
    MalformedResponse,
    OverloadedError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTimeout,
    ServerError,
)
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.policy.circuit import CircuitSettings
from batchgate.policy.retry import NEVER_RETRIED, RetryPolicy, RetrySettings
from batchgate.quota.limits import QuotaLimits
from batchgate.runtime import build_runtime
from batchgate.scheduler import Scheduler, Target
from batchgate.slots import FairSlots
from batchgate.tokens import EstimatingTokenCounter

_HINTS = st.one_of(
    st.just({}),
    st.builds(lambda v: {"retry-after": v}, st.sampled_from(["1", "0", "86400", "-4", "nan", "x", "2.5"])),
    st.builds(lambda v: {"retry-after-ms": v}, st.sampled_from(["10", "99999999", "-1", "inf"])),
    st.just({"x-should-retry": "true"}),
    st.just({"x-should-retry": "false"}),
)
_KINDS = [RateLimitError, ServerError, OverloadedError, ConnectError, RequestTimeout, MalformedResponse,
          BadRequestError, AuthenticationError, QuotaExhaustedError]  # fmt: skip
_OUTCOME = st.one_of(st.just(None), st.tuples(st.sampled_from(_KINDS), _HINTS))


class ScriptedClient:
    """Answers each send with the next scripted outcome: None is a success, else an error."""

    name = "p"
    kind = "openai"

    def __init__(self, outcomes: list[tuple[type[ProviderError], dict[str, str]] | None]) -> None:
        self.outcomes = list(outcomes)
        self.sent = 0

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        self.sent += 1
        outcome = self.outcomes.pop(0) if self.outcomes else None
        await asyncio.sleep(0)
        if outcome is None:
            usage = Usage(prompt_tokens=7, completion_tokens=2)
            return ProviderResponse(200, {"choices": [{"message": {"content": "ok"}}]}, usage, {})
        cls, headers = outcome
        statuses: dict[type[ProviderError], int] = {
            RateLimitError: 429, ServerError: 503, OverloadedError: 529, BadRequestError: 400,
            AuthenticationError: 401, QuotaExhaustedError: 429,
        }  # fmt: skip
        status = statuses.get(cls)
        raise cls(f"p: scripted {cls.__name__}", provider="p", status=status, headers=dict(headers))

    def rate_limits(self, headers: Any, wall_now: float) -> RateLimitSnapshot:
        return RateLimitSnapshot()


async def _scenario(
    outcomes: list[tuple[type[ProviderError], dict[str, str]] | None],
    max_attempts: int,
    base_delay: float,
    max_delay: float,
    max_hint: float,
    seed: int,
) -> None:
    clock = FakeClock()
    client = ScriptedClient(outcomes)
    config = ProviderConfig(
        name="p", kind="openai", base_url="http://x", limits=QuotaLimits(rpm=600, tpm=60_000)
    )
    runtime = build_runtime(config, client, EstimatingTokenCounter(), clock, CircuitSettings(), seed=seed)
    pauses: list[float] = []
    real_pause = runtime.pool.pause

    def spy_pause(seconds: float) -> None:
        pauses.append(seconds)
        real_pause(seconds)

    runtime.pool.pause = spy_pause  # type: ignore[method-assign]
    policy = RetryPolicy(RetrySettings(max_attempts, base_delay, max_delay, max_hint), random.Random(seed))
    sched = Scheduler(
        {"m": [Target(runtime, "m")]},
        clock=clock,
        retry=policy,
        global_slots=FairSlots(4, ["p"], clock),
    )
    body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hello there"}]}
    task = asyncio.ensure_future(sched.run(0, body))
    for _ in range(20_000):
        if task.done():
            break
        await asyncio.sleep(0)
        clock.advance(0.05)
    assert task.done(), "the request never finished"
    result = task.result()

    attempts = result.attempts
    assert 1 <= len(attempts) <= max_attempts
    assert client.sent == len(attempts)
    answered = False  # the target gave an answer other than 401 (it is there, the key works)
    for i, attempt in enumerate(attempts[:-1]):  # every try but the last was a retryable failure
        entry = outcomes[i]
        assert attempt.error_kind is not None
        assert entry is not None
        error_cls, headers = entry
        # a key refused before any answer puts the target in doubt: retried until taken out
        in_doubt = error_cls is AuthenticationError and not answered
        if headers.get("x-should-retry") != "true" and not in_doubt:
            assert not issubclass(error_cls, NEVER_RETRIED), (i, error_cls)
        # an HTTP status is an answer (the target is there); a broken connection or a hang is not
        answered = answered or (
            issubclass(error_cls, HTTPStatusError) and error_cls is not AuthenticationError
        )
    if result.ok:
        assert attempts[-1].error_kind is None
    else:
        assert result.error is not None
    assert all(0 <= s <= max_delay + 1e-9 for s in clock.sleeps), clock.sleeps
    assert all(0 < p <= max_hint + 1e-9 for p in pauses), pauses

    # every reservation settles: after long enough, the buckets are full again and nobody waits
    clock.advance(3600.0)
    await asyncio.sleep(0)
    stats = runtime.pool.statistics()
    assert stats.waiters == 0
    assert stats.paused_until is None
    for dim, capacity in stats.capacities.items():
        assert abs(stats.levels[dim] - capacity) <= 1e-6 * max(1.0, capacity), (dim, stats)


@pytest.mark.slow  # property: many runs
@settings(max_examples=200, deadline=None)
@given(
    outcomes=st.lists(_OUTCOME, max_size=12),
    max_attempts=st.integers(1, 8),
    base_delay=st.floats(0.0, 2.0),
    max_delay=st.floats(0.0, 5.0),
    max_hint=st.floats(0.0, 5.0),
    seed=st.integers(0, 2**16),
)
@example(  # issue 46: a hint capped to nothing is no hint (no 0 s pause, the own backoff)
    outcomes=[(RateLimitError, {"retry-after": "1"})],
    max_attempts=1,
    base_delay=0,
    max_delay=0,
    max_hint=0,
    seed=0,
)
@example(  # a connection error is no answer: a 401 after it is still in doubt, and tried again
    outcomes=[(ConnectError, {}), (AuthenticationError, {})],
    max_attempts=3,
    base_delay=0,
    max_delay=0,
    max_hint=5,
    seed=0,
)
@example(  # `retry-after: 0` asks for no pause
    outcomes=[(RateLimitError, {"retry-after": "0"}), None],
    max_attempts=2,
    base_delay=0,
    max_delay=0,
    max_hint=5,
    seed=0,
)
def test_property_attempt_loop_is_bounded_and_settles(
    outcomes: list[tuple[type[ProviderError], dict[str, str]] | None],
    max_attempts: int,
    base_delay: float,
    max_delay: float,
    max_hint: float,
    seed: int,
) -> None:
    asyncio.run(_scenario(outcomes, max_attempts, base_delay, max_delay, max_hint, seed))
