"""The circuit breaker: closed → open → half-open (one probe) → closed or open again."""

from __future__ import annotations

import pytest

from batchgate.errors import BadRequestError, ConnectError, OverloadedError, RateLimitError, ServerError
from batchgate.policy.circuit import CircuitBreaker, CircuitSettings, counts_as_failure


def breaker() -> CircuitBreaker:
    return CircuitBreaker(CircuitSettings(failure_threshold=3, open_seconds=10.0))


def test_opens_after_consecutive_failures() -> None:
    b = breaker()
    b.record_failure(0.0)
    b.record_failure(0.1)
    assert b.state(0.2) == "closed"
    assert b.allow(0.2)
    b.record_failure(0.3)
    assert b.state(0.3) == "open"
    assert not b.allow(5.0)
    assert b.opened == 1


def test_success_resets_the_count() -> None:
    b = breaker()
    b.record_failure(0.0)
    b.record_failure(0.1)
    b.record_success(0.2)
    b.record_failure(0.3)
    b.record_failure(0.4)
    assert b.state(0.5) == "closed"


def test_half_open_lets_one_probe_through() -> None:
    b = breaker()
    for t in (0.0, 0.1, 0.2):
        b.record_failure(t)
    assert b.state(10.1) == "open"
    assert b.state(10.2) == "half_open"
    assert b.available(10.2)
    assert b.allow(10.2)  # the probe
    assert not b.allow(10.3)  # only one
    assert not b.available(10.3)
    b.record_success(11.0)
    assert b.state(11.0) == "closed"
    assert b.allow(11.0)
    assert b.allow(11.0)


def test_failed_probe_reopens() -> None:
    b = breaker()
    for t in (0.0, 0.1, 0.2):
        b.record_failure(t)
    assert b.allow(10.5)
    b.record_failure(11.0)
    assert b.state(11.0) == "open"
    assert not b.allow(20.9)
    assert b.state(21.0) == "half_open"
    assert b.opened == 2


def test_lost_probe_is_replaced_after_open_seconds() -> None:
    b = breaker()
    for t in (0.0, 0.1, 0.2):
        b.record_failure(t)
    assert b.allow(10.5)
    assert not b.allow(20.0)
    assert b.allow(20.5)


def test_failure_classification() -> None:
    assert counts_as_failure(ConnectError())
    assert counts_as_failure(ServerError(status=502))
    assert counts_as_failure(OverloadedError(status=529))
    assert not counts_as_failure(RateLimitError(status=429))  # a healthy target that is busy
    assert not counts_as_failure(BadRequestError(status=400))


def test_settings_validation_and_repr() -> None:
    with pytest.raises(ValueError, match="failure_threshold"):
        CircuitSettings(failure_threshold=0)
    assert "failures=0" in repr(CircuitBreaker())
