"""The learned in-flight cap never falls below what was proven to work, recovers without waiting
out the probe period once an answer refutes the ceiling, and starts slow at a provider nothing is
known about (issue 38)."""

from __future__ import annotations

from batchgate.policy.concurrency import ConcurrencyAimd


def test_a_refusal_at_or_below_the_proven_level_is_out_of_order_and_cuts_nothing() -> None:
    aimd = ConcurrencyAimd(None, start=4)
    for n in range(1, 5):  # four at once, all answered, nothing refused meanwhile
        aimd.on_success(now=1.0, in_flight=n, sent=0.5)
    assert aimd.proven == 4
    assert aimd.on_refused(6, now=2.0)  # above what was proven: a cut, to 5
    assert not aimd.on_refused(2, now=2.1)  # a connection that opened late: says nothing of the cap
    assert not aimd.on_refused(4, now=2.2)
    assert aimd.limit is not None
    assert aimd.limit >= 4


def test_a_cut_never_goes_below_the_proven_level() -> None:
    aimd = ConcurrencyAimd(None)
    aimd.on_success(now=1.0, in_flight=6, sent=0.5)
    aimd.on_refused(8, now=2.0)
    assert aimd.limit == 7
    aimd.on_refused(7, now=2.1)
    assert aimd.limit == 6  # never below the 6 proven


def test_an_answer_with_a_refusal_in_its_lifetime_proves_nothing() -> None:
    aimd = ConcurrencyAimd(None)
    aimd.on_refused(3, now=1.0)
    aimd.on_success(now=1.5, in_flight=5, sent=0.9)  # sent before that refusal: it may have been one of its 5
    assert aimd.proven == 0
    assert aimd.limit == 2


def test_an_answer_at_the_refused_level_ends_the_wait_for_the_probe() -> None:
    aimd = ConcurrencyAimd(None)
    aimd.on_refused(5, now=0.0)
    assert aimd.limit == 4
    aimd.on_success(now=1.0, in_flight=5, sent=0.5)  # 5 answered at once: the ceiling was wrong
    assert aimd.limit is not None
    assert aimd.limit >= 5


def test_a_provider_nothing_is_known_about_starts_slow_and_doubles_each_round_trip() -> None:
    aimd = ConcurrencyAimd(None, start=4)
    assert aimd.limit == 4
    for i in range(4):
        aimd.on_success(now=1.0, in_flight=i + 1, sent=0.5)
    assert aimd.limit == 8
    aimd.on_refused(9, now=2.0)  # the first refusal ends the slow start
    limit = aimd.limit
    aimd.on_success(now=2.5, in_flight=3, sent=2.1)
    assert aimd.limit == limit


def test_a_configured_maximum_has_no_slow_start() -> None:
    assert ConcurrencyAimd(16, start=4).limit == 16
