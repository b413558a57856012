"""Adaptive timeouts / hedging thresholds and the learned in-flight limit (pure policies)."""

from __future__ import annotations

import pytest

from batchgate.policy.concurrency import ConcurrencyAimd, ConcurrencySettings
from batchgate.policy.latency import LatencyModel, LatencySettings


def test_timeout_is_the_maximum_until_enough_answers_then_p95_times_factor_plus_margin() -> None:
    model = LatencyModel(120.0, LatencySettings(min_samples=20, refresh=1))
    assert model.hedge_after() == 10.0  # nothing known: a cold hedge, never the whole maximum
    for _ in range(19):
        model.observe(0.5)
    assert model.timeout() == 120.0
    assert model.hedge_after() == pytest.approx(4 * 0.5 + 1.0)  # far past the slowest so far
    model.observe(0.5)
    assert model.timeout() == pytest.approx(0.5 * 1.5 + 1.0)
    assert model.hedge_after() == pytest.approx(1.0)  # twice p95: far past the usual tail


def test_timeout_doubles_per_earlier_timeout_but_never_passes_the_maximum() -> None:
    model = LatencyModel(5.0, LatencySettings(min_samples=1, refresh=1))
    model.observe(1.0)
    assert model.timeout(0) == pytest.approx(2.5)
    assert model.timeout(1) == pytest.approx(5.0)
    assert model.timeout(3) == 5.0


def test_a_slow_tail_moves_p95_and_the_hedge_threshold() -> None:
    model = LatencyModel(120.0, LatencySettings(min_samples=20, refresh=1))
    for i in range(100):
        model.observe(4.0 if i % 10 == 0 else 0.2)  # 10 % slow answers
    assert model.timeout() == pytest.approx(7.0)  # p95 = 4 s → 1.5 × 4 + 1
    assert model.hedge_after() is None  # 2 × 4 s is past the timeout: the timeout retries it
    for _ in range(256):
        model.observe(0.6)  # the slow answers age out of the window: p95 = 0.6 s
    assert model.hedge_after() == pytest.approx(1.2)


def test_a_fast_provider_is_never_hedged_sooner_than_the_floor() -> None:
    model = LatencyModel(120.0, LatencySettings(min_samples=20, refresh=1))
    for i in range(100):
        model.observe(0.15 if i % 20 == 0 else 0.03)  # a fast server, stragglers from queueing
    assert model.timeout() == pytest.approx(1.0 + 0.15 * 1.5)
    assert model.hedge_after() == pytest.approx(1.0)  # not 2 × 0.15 s: that copy would queue too
    quick = LatencyModel(120.0, LatencySettings(min_samples=20, refresh=1, hedge_floor=0.0))
    for i in range(100):
        quick.observe(0.15 if i % 20 == 0 else 0.03)
    assert quick.hedge_after() == pytest.approx(0.3)


def test_garbage_latencies_are_ignored() -> None:
    model = LatencyModel(10.0, LatencySettings(min_samples=1, refresh=1))
    model.observe(float("nan"))
    model.observe(-1.0)
    assert not model.ready


def test_a_refusal_sets_the_limit_below_what_was_in_flight_and_holds_the_ceiling() -> None:
    aimd = ConcurrencyAimd(None, ConcurrencySettings(probe_period=30.0))
    assert aimd.on_refused(17, now=0.0)
    assert aimd.limit == 16
    for i in range(200):  # clean answers: grows only up to one below the refused level
        aimd.on_success(now=1.0 + i * 0.01)
    assert aimd.limit == 16
    for i in range(20):  # after the probe period it tries 17 again (one step per 16 answers)
        aimd.on_success(now=31.0 + i * 0.01)
    assert aimd.limit == 17


def test_refusals_below_the_limit_cut_further_but_never_below_the_minimum() -> None:
    aimd = ConcurrencyAimd(8)
    assert aimd.on_refused(5, now=0.0)
    assert aimd.limit == 4
    assert not aimd.on_refused(6, now=0.1)  # sent with more in flight: says nothing new
    aimd.on_refused(1, now=0.2)
    assert aimd.limit == 1


def test_the_configured_maximum_is_never_exceeded() -> None:
    aimd = ConcurrencyAimd(3)
    for i in range(100):
        aimd.on_success(now=float(i))
    assert aimd.limit == 3
