"""Taking a target out: a refused key or nowhere to connect, a few times in a row, and the target
is out for good; any other answer starts the count again; a target that answered before is
paused up to `max_outage` instead (`test_outage.py`). A key refused one model (403/404
`model_not_found`) takes out that model alone, at once. Pure: times are passed in, nothing sleeps."""

from __future__ import annotations

import pytest

from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    ModelRefusedError,
    RateLimitError,
    RequestTimeout,
    ServerError,
    UnreachableError,
)
from batchgate.policy.circuit import CircuitBreaker, CircuitSettings
from batchgate.policy.takeout import TakeOut, TakeOutSettings, allowed, fatal_cause

KEY = AuthenticationError("alpha: HTTP 401", provider="alpha", status=401)
REFUSED = UnreachableError("alpha: unreachable", provider="alpha", cause="connection refused")


def test_a_refused_key_three_times_takes_the_target_out() -> None:
    t = TakeOut(TakeOutSettings(after=3))
    assert not t.record(KEY, 0.0)
    assert not t.record(KEY, 0.1)
    assert t.streak == 2
    assert t.record(KEY, 0.2)
    assert t.out
    assert t.reason == "API key refused (HTTP 401), 3 times in a row"
    assert not t.record(KEY, 0.3)  # it is taken out once
    t.record_answer()
    assert t.out  # out for good: a late answer of a request sent before does not bring it back


def test_nowhere_to_connect_names_the_cause() -> None:
    t = TakeOut(TakeOutSettings(after=2))
    t.record(REFUSED, 0.0)
    assert t.record(REFUSED, 0.0)
    assert t.reason == "connection refused, 2 times in a row"


def test_another_answer_starts_the_count_again() -> None:
    t = TakeOut(TakeOutSettings(after=3))
    t.record(KEY, 0.0)
    t.record(KEY, 0.1)
    assert not t.record(RateLimitError("429", status=429), 0.2)  # the server answered: key accepted
    assert t.streak == 0
    t.record(KEY, 0.3)
    t.record(KEY, 0.4)
    assert not t.out


def test_timeouts_prove_nothing_either_way() -> None:
    t = TakeOut(TakeOutSettings(after=2))
    t.record(REFUSED, 0.0)
    t.record(RequestTimeout("slow"), 0.1)
    assert t.streak == 1
    assert t.record(REFUSED, 0.2)


@pytest.mark.parametrize(
    "error",
    [ServerError("500", status=500), BadRequestError("400", status=400), RequestTimeout("slow")],
)
def test_only_a_refused_key_or_no_connection_is_fatal(error: Exception) -> None:
    assert fatal_cause(error) is None
    assert fatal_cause(AuthenticationError("403", status=403)) == "API key refused (HTTP 403)"
    assert fatal_cause(REFUSED) == "connection refused"


def test_a_target_that_answered_before_is_paused_not_taken_out() -> None:
    t = TakeOut(TakeOutSettings(after=3, max_outage_seconds=30.0))
    t.record_answer()
    assert t.record(REFUSED, 100.0) is None
    assert t.record(REFUSED, 100.5) is None
    assert t.record(REFUSED, 101.0) == "paused"  # a restart, a blip: waited out
    assert not t.out
    assert t.pause is not None
    assert t.pause.since == 100.0
    assert t.record(REFUSED, 120.0) == "paused"
    assert t.record(REFUSED, 130.0) == "out"  # the outage outlasted max_outage
    assert t.reason == "connection refused, waited 30s (max_outage) and 0 probes"
    assert not t.key_refused


def test_max_outage_zero_takes_out_an_answered_target_like_any_other() -> None:
    t = TakeOut(TakeOutSettings(after=2, max_outage_seconds=0.0))
    t.record_answer()
    t.record(REFUSED, 0.0)
    assert t.record(REFUSED, 0.1) == "out"
    assert t.reason == "connection refused, 2 times in a row over 0s"


def test_zero_never_takes_out() -> None:
    t = TakeOut(TakeOutSettings(after=0))
    for i in range(100):
        assert not t.record(KEY, float(i))
    assert not t.out
    with pytest.raises(ValueError, match="take_out_after"):
        TakeOutSettings(after=-1)


def test_an_out_target_is_not_available_in_the_breaker_for_good_with_no_readmission() -> None:
    b = CircuitBreaker(CircuitSettings(take_out=TakeOutSettings(after=1, readmit_seconds=0.0)))
    assert b.available(0.0)
    assert b.takeout.record(KEY, 0.0)
    assert b.is_out(0.0)
    assert b.state(0.0) == "out"
    for now in (0.0, 100.0, 10_000.0):
        assert not b.available(now)
        assert not b.allow(now)
    b.record_success(20_000.0)
    assert b.state(20_000.0) == "out"


def test_a_success_in_the_breaker_resets_the_count() -> None:
    b = CircuitBreaker(CircuitSettings(take_out=TakeOutSettings(after=2)))
    b.takeout.record(KEY, 0.0)
    b.record_success(0.1)
    assert not b.takeout.record(KEY, 0.2)  # the count started again
    assert b.takeout.record(KEY, 0.3) == "out"  # a refused key is never waited out


def test_a_refusal_is_in_doubt_only_before_the_target_answered() -> None:
    t = TakeOut(TakeOutSettings(after=3))
    assert t.in_doubt(KEY)
    assert t.in_doubt(REFUSED)
    assert not t.in_doubt(ServerError("500", status=500))
    t.record_answer()
    assert not t.in_doubt(KEY)  # the key worked: this 401 is the request's own
    assert not TakeOut(TakeOutSettings(after=0)).in_doubt(KEY)  # never taken out: nothing to decide


def test_a_target_out_for_its_time_is_given_its_tries_again() -> None:
    b = CircuitBreaker(CircuitSettings(take_out=TakeOutSettings(after=2, readmit_seconds=300.0)))
    b.takeout.record(REFUSED, 0.0)
    assert b.takeout.record(REFUSED, 1.0)
    assert b.state(300.0) == "out"
    assert b.state(301.0) == "closed"  # a DNS blip at a server's start does not last its life
    assert not b.takeout.record(REFUSED, 302.0)
    assert b.takeout.record(REFUSED, 303.0)  # still refused: out again, for another 300 s
    assert b.is_out(602.0)
    never = TakeOut(TakeOutSettings(after=1, readmit_seconds=0.0))
    assert never.record(KEY, 0.0)
    assert never.is_out(10**9)


MODEL_403 = ModelRefusedError("alpha: HTTP 403 model_not_found", provider="alpha", status=403)


def test_a_model_refused_takes_out_that_model_alone_at_once() -> None:
    t = TakeOut(TakeOutSettings(after=3, readmit_seconds=60.0))
    assert t.models.record(MODEL_403, "gpt-4o", 0.0) is True  # the first refusal: out now
    assert t.models.record(MODEL_403, "gpt-4o", 0.1) is False  # one sent before: out already
    assert t.models.reason("gpt-4o", 1.0) == (
        "provider alpha's key may not use model 'gpt-4o' (HTTP 403 model_not_found)"
    )
    assert t.models.reason("gpt-4o-mini", 1.0) is None  # the provider's other models are in
    assert not t.record(MODEL_403, 0.2)  # not the key: the provider itself stays in
    assert (t.out, t.streak, t.answered) == (False, 0, True)
    assert t.models.reason("gpt-4o", 60.0) is None  # tried again after its time out


@pytest.mark.parametrize("error", [KEY, REFUSED, BadRequestError("x", provider="alpha", status=404)])
def test_only_a_model_refusal_takes_a_model_out(error: Exception) -> None:
    t = TakeOut(TakeOutSettings(after=1))
    assert t.models.record(error, "gpt-4o", 0.0) is None
    assert t.models.reason("gpt-4o", 0.0) is None


def test_with_take_outs_off_a_model_refusal_is_the_requests_own_failure() -> None:
    t = TakeOut(TakeOutSettings(after=0))
    assert t.models.record(MODEL_403, "gpt-4o", 0.0) is None
    assert t.models.reason("gpt-4o", 0.0) is None


def test_allowed_keeps_the_targets_a_key_may_use_or_fails_the_request_alone() -> None:
    out = {"alpha": "provider alpha's key may not use model 'm' (HTTP 403 model_not_found)"}
    assert allowed(["alpha", "beta"], out.get, "m") == ["beta"]
    assert allowed([], out.get, "m") == []
    with pytest.raises(ModelRefusedError, match=r"^provider alpha's key .*; no target left for model 'm'$"):
        allowed(["alpha"], out.get, "m")
    with pytest.raises(ModelRefusedError) as answered:
        allowed(["alpha"], out.get, "m", MODEL_403)  # the refusal just answered, as it came
    assert answered.value is MODEL_403
