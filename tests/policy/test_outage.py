"""Waiting out an outage, decided on a fake clock: a target that answered before and then cannot
be reached (refused, DNS, resets, timeouts; a 5xx is an answer) is paused after a few failures in a row,
probed one request at a time at a doubling pace (1 s to 30 s), resumed by any answer and taken
out only once the outage outlasts `max_outage`. A target that never answered is the fast stop it
was; a refused key is taken out, never paused. Pure: times are passed in, nothing sleeps."""

from __future__ import annotations

import pytest

from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    ConnectError,
    RateLimitError,
    RequestTimeout,
    ServerError,
    UnreachableError,
)
from batchgate.policy.circuit import CircuitBreaker, CircuitSettings
from batchgate.policy.outage import MAX_PROBE_S, Pause, outage_cause
from batchgate.policy.takeout import TakeOut, TakeOutSettings

REFUSED = UnreachableError("alpha: unreachable", provider="alpha", cause="connection refused")
KEY = AuthenticationError("alpha: HTTP 401", provider="alpha", status=401)


def _answered(max_outage: float = 1800.0) -> TakeOut:
    t = TakeOut(TakeOutSettings(after=3, max_outage_seconds=max_outage))
    t.record_answer()
    return t


def _paused(t: TakeOut, now: float = 0.0) -> Pause:
    for _ in range(3):
        t.record(REFUSED, now)
    assert t.pause is not None
    return t.pause


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (REFUSED, "connection refused"),
        (ConnectError("reset"), "connection broken"),
        (RequestTimeout("slow"), "timed out"),
        (ServerError("502", status=502), None),  # an answer: the retry policy's, bounded
        (ServerError("503", status=503), None),  # also a concurrency refusal: the quota's to learn
        (ServerError("500", status=500), None),
        (RateLimitError("429", status=429), None),
        (BadRequestError("400", status=400), None),
    ],
)
def test_what_counts_as_an_outage(error: Exception, cause: str | None) -> None:
    assert outage_cause(error) == cause


def test_resets_and_timeouts_pause_an_answered_target_and_5xx_answers_do_not() -> None:
    t = _answered()
    assert t.record(ConnectError("reset"), 0.0) is None
    assert t.record(RequestTimeout("slow"), 0.1) is None
    assert t.record(ConnectError("reset"), 0.2) == "paused"
    other = _answered()
    for i in range(10):
        assert other.record(ServerError("502", status=502), float(i)) is None
    assert other.pause is None


def test_a_target_that_never_answered_is_taken_out_not_paused() -> None:
    t = TakeOut(TakeOutSettings(after=3))
    assert [t.record(REFUSED, x) for x in (0.0, 0.1, 0.2)] == [None, None, "out"]
    assert t.pause is None
    assert t.reason == "connection refused, 3 times in a row"


def test_timeouts_on_a_target_that_never_answered_still_prove_nothing() -> None:
    t = TakeOut(TakeOutSettings(after=1))
    assert t.record(RequestTimeout("slow"), 0.0) is None
    assert t.streak == 0


def test_a_refused_key_is_taken_out_even_after_answers_and_says_so() -> None:
    t = _answered()
    assert [t.record(KEY, x) for x in (0.0, 0.1, 0.2)] == [None, None, "out"]
    assert t.key_refused
    assert t.pause is None


def test_probes_go_one_at_a_time_at_a_doubling_pace_up_to_thirty_seconds() -> None:
    t = _answered()
    pause = _paused(t, now=10.0)
    assert not pause.claim(10.5)  # the first probe one second after the pause began
    assert pause.claim(11.0)
    assert not pause.claim(11.0)  # one probe at a time
    assert t.record(REFUSED, 11.2) == "paused"  # a request sent before: not the probe's verdict
    assert pause.probing
    now, waits = 11.2, []
    for _ in range(7):
        assert t.record(REFUSED, now, probe=True) == "paused"
        waits.append(pause.next_probe - now)
        now = pause.next_probe
        assert pause.claim(now)
    assert waits == pytest.approx([2.0, 4.0, 8.0, 16.0, MAX_PROBE_S, MAX_PROBE_S, MAX_PROBE_S])


def test_a_probe_ended_without_a_verdict_lets_the_next_go_at_once() -> None:
    pause = _paused(_answered(), now=0.0)
    assert pause.claim(1.0)
    pause.released()
    assert pause.claim(1.0)


def test_any_answer_ends_the_pause() -> None:
    t = _answered()
    _paused(t)
    assert t.record(RateLimitError("429", status=429), 5.0) is None
    assert t.pause is None
    assert t.streak == 0
    _paused(t, now=6.0)
    t.record_answer()  # a probe that succeeded
    assert t.pause is None
    assert not t.out


def test_an_outage_longer_than_max_outage_takes_the_target_out() -> None:
    t = _answered(max_outage=120.0)
    pause = _paused(t, now=0.0)
    now = 0.0
    while True:
        now = pause.next_probe
        assert pause.claim(now)
        verdict = t.record(REFUSED, now, probe=True)
        if verdict == "out":
            break
        assert now < 120.0
    assert now >= 120.0
    assert t.out
    assert t.pause is None
    assert (t.reason or "").startswith("connection refused, waited ")


def test_the_breaker_shows_a_paused_target_and_routes_around_it() -> None:
    b = CircuitBreaker(CircuitSettings(take_out=TakeOutSettings(after=2)))
    b.record_success(0.0)
    b.takeout.record(REFUSED, 1.0)
    assert b.takeout.record(REFUSED, 1.0) == "paused"
    assert b.state(1.0) == "paused"
    assert not b.available(1.0)
    assert not b.is_out(1.0)
    b.record_success(3.0)
    assert b.state(3.0) == "closed"
    assert b.available(3.0)


def test_max_outage_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="max_outage"):
        TakeOutSettings(max_outage_seconds=-1.0)
