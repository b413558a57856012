"""The retry policy: which errors are retried, how long to wait, and the attempt bound."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.errors import (
    AnswerTooLarge,
    AuthenticationError,
    BadRequestError,
    BatchgateError,
    ConnectError,
    GarbledHead,
    MalformedResponse,
    NeverFitsError,
    OverloadedError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTimeout,
    RetryableStatusError,
    RoutingError,
    ServerError,
)
from batchgate.policy.retry import RetryDecision, RetryPolicy, RetrySettings, is_retryable

NOW = 1_800_000_000.0

RETRIED: list[BatchgateError] = [
    ConnectError(provider="p"),
    RequestTimeout(provider="p"),
    MalformedResponse(provider="p"),
    RateLimitError(provider="p", status=429),
    OverloadedError(provider="p", status=529),
    ServerError(provider="p", status=500),
    ServerError(provider="p", status=503),
    RetryableStatusError(provider="p", status=408),
    RetryableStatusError(provider="p", status=409),
]
NEVER: list[BaseException] = [
    AuthenticationError(provider="p", status=401),
    BadRequestError(provider="p", status=400),
    BadRequestError(provider="p", status=422),
    QuotaExhaustedError(provider="p", status=429),
    NeverFitsError("too big"),
    RoutingError("no route"),
    ValueError("a bug is not retried"),
]


def policy(
    seed: int = 7,
    *,
    max_attempts: int = 8,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    max_hint: float = 60.0,
) -> RetryPolicy:
    chosen = RetrySettings(max_attempts, base_delay, max_delay, max_hint)
    return RetryPolicy(chosen, random.Random(seed))


@pytest.mark.parametrize("error", RETRIED, ids=lambda e: type(e).__name__)
def test_retried_types(error: BatchgateError) -> None:
    assert is_retryable(error)
    decision = policy().decide(error, 1, NOW)
    assert decision.retry
    assert not decision.hinted
    assert 0.0 <= decision.delay <= 0.5


@pytest.mark.parametrize("error", NEVER, ids=lambda e: type(e).__name__)
def test_never_retried_types(error: BaseException) -> None:
    assert not is_retryable(error)
    decision = policy().decide(error, 1, NOW)
    assert decision == RetryDecision(False, 0.0, decision.reason, False)
    assert "never retried" in decision.reason


def test_quota_exhausted_429_never_retried_even_with_retry_after() -> None:
    error = QuotaExhaustedError(provider="p", status=429, headers={"retry-after": "1"})
    assert not policy().decide(error, 1, NOW).retry


def test_hint_is_the_delay() -> None:
    error = RateLimitError(provider="p", status=429, headers={"Retry-After": "3"})
    decision = policy().decide(error, 2, NOW)
    assert decision.retry
    assert decision.hinted
    assert decision.delay == 3.0


def test_hint_ms_and_absurd_hint_capped() -> None:
    ms = RateLimitError(provider="p", status=429, headers={"retry-after-ms": "1250"})
    assert policy().decide(ms, 1, NOW).delay == 1.25
    absurd = RateLimitError(provider="p", status=429, headers={"retry-after": "86400"})
    assert policy(max_hint=20.0).decide(absurd, 1, NOW).delay == 20.0
    garbage = RateLimitError(provider="p", status=429, headers={"retry-after": "-3"})
    decision = policy().decide(garbage, 1, NOW)
    assert decision.retry
    assert not decision.hinted
    assert decision.delay <= 0.5


def test_x_should_retry_overrides_type() -> None:
    bad = BadRequestError(provider="p", status=400, headers={"x-should-retry": "true"})
    decision = policy().decide(bad, 1, NOW)
    assert decision.retry
    assert "x-should-retry" in decision.reason
    server = ServerError(provider="p", status=500, headers={"X-Should-Retry": "false"})
    assert not policy().decide(server, 1, NOW).retry


def test_x_should_retry_never_passes_the_attempt_bound() -> None:
    error = BadRequestError(provider="p", status=400, headers={"x-should-retry": "true"})
    assert policy(max_attempts=3).decide(error, 2, NOW).retry
    decision = policy(max_attempts=3).decide(error, 3, NOW)
    assert not decision.retry
    assert "3 of 3" in decision.reason


def test_attempt_bound() -> None:
    p = policy(max_attempts=4)
    error = ServerError(provider="p", status=500)
    assert [p.decide(error, n, NOW).retry for n in (1, 2, 3, 4, 5)] == [True, True, True, False, False]


def test_backoff_full_jitter_grows_and_is_capped() -> None:
    p = policy(seed=1, base_delay=0.5, max_delay=4.0)
    error = ConnectError(provider="p")
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 4.0), (7, 4.0)]:
        delays = [p.decide(error, attempt, NOW).delay for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # jitter spans the whole range, not a fixed delay
        assert min(delays) < ceiling * 0.2


def test_backoff_grows_with_the_providers_run_of_failures_not_one_requests_bad_luck() -> None:
    p = policy(seed=3, base_delay=0.5, max_delay=30.0)
    error = ServerError(provider="p", status=503)
    # the provider answers the rest (its streak is this one failure): the first step's wait,
    # whatever try this is
    healthy = [p.decide(error, attempt, NOW, streak=1).delay for attempt in (2, 4, 6) for _ in range(100)]
    assert all(0.0 <= d <= 0.5 for d in healthy)
    # everything fails (the streak grows with the tries): doubling waits, as without a streak
    failing = [p.decide(error, 5, NOW, streak=9).delay for _ in range(200)]
    assert all(0.0 <= d <= 8.0 for d in failing)
    assert max(failing) > 0.5 * 8.0
    # a streak longer than the tries does not lengthen a young request's wait
    assert all(p.decide(error, 1, NOW, streak=9).delay <= 0.5 for _ in range(100))
    # a streak of 0 (the failure was not the provider's: a 429) waits the first step, never less
    assert max(p.decide(error, 3, NOW, streak=0).delay for _ in range(200)) > 0.25


def test_seeded_rng_is_reproducible() -> None:
    error = OverloadedError(provider="p", status=529)
    first = [policy(seed=42).decide(error, n, NOW).delay for n in range(1, 6)]
    second = [policy(seed=42).decide(error, n, NOW).delay for n in range(1, 6)]
    assert first == second


def test_attempt_must_count_from_one() -> None:
    with pytest.raises(ValueError, match="starts at 1"):
        policy().decide(ConnectError(), 0, NOW)


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetrySettings(max_attempts=0)
    with pytest.raises(ValueError, match="negative"):
        RetrySettings(base_delay=-1)


_ERRORS = st.sampled_from([*RETRIED, *NEVER])
_HEADERS = st.dictionaries(
    st.sampled_from(["retry-after", "Retry-After-Ms", "x-should-retry", "other"]),
    st.one_of(
        st.sampled_from(["true", "false", "nan", "-1", "inf", "86400", "Wed, 21 Oct 2015 07:28:00 GMT"]),
        st.floats(allow_nan=True, allow_infinity=True).map(str),
        st.text(max_size=12),
    ),
    max_size=3,
)


@pytest.mark.slow  # property: many runs
@settings(max_examples=400, deadline=None)
@given(
    error=_ERRORS,
    headers=_HEADERS,
    max_attempts=st.integers(1, 10),
    base=st.floats(0.0, 5.0),
    max_delay=st.floats(0.0, 60.0),
    max_hint=st.floats(0.0, 120.0),
    seed=st.integers(0, 2**32),
)
def test_property_bounded_attempts_and_delays(
    error: BaseException,
    headers: dict[str, str],
    max_attempts: int,
    base: float,
    max_delay: float,
    max_hint: float,
    seed: int,
) -> None:
    if isinstance(error, ProviderError):
        error.headers = headers
    s = RetrySettings(max_attempts=max_attempts, base_delay=base, max_delay=max_delay, max_hint=max_hint)
    p = RetryPolicy(s, random.Random(seed))
    tries = 1
    while True:
        decision = p.decide(error, tries, NOW)
        assert decision.delay >= 0.0
        if decision.hinted:
            assert decision.delay <= max_hint
        else:
            assert decision.delay <= min(max_delay, base * 2 ** (tries - 1)) + 1e-12
        if not decision.retry:
            assert decision.delay == 0.0
            break
        tries += 1
        assert tries <= max_attempts
    assert tries <= max_attempts


@pytest.mark.parametrize("error", [AnswerTooLarge("p: too large"), GarbledHead("p: not HTTP")])
def test_an_answer_no_retry_can_read_is_tried_at_most_twice(error: ProviderError) -> None:
    """Issue 38: a 64 KiB head was retried 8x per line, every answer paid for."""
    policy = RetryPolicy(RetrySettings(max_attempts=8, base_delay=0.0), random.Random(0))
    assert policy.decide(error, 1, 0.0).retry
    decision = policy.decide(error, 2, 0.0)
    assert not decision.retry
    assert "gave up after 2 of 2 attempts" in decision.reason
    assert policy.decide(MalformedResponse("p: not JSON"), 2, 0.0).retry  # a garbled body may pass
