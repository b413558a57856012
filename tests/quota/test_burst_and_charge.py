"""The burst a provider tolerates and what it charges: learned, never assumed (pure)."""

from __future__ import annotations

import pytest

from batchgate.models import RateLimitSnapshot
from batchgate.quota.charge import ChargeModel, ChargeSettings, binding_dimension
from batchgate.quota.learning import BurstLearner, BurstSettings


def test_no_burst_at_first_and_none_earned_without_trying_one() -> None:
    burst = BurstLearner(BurstSettings(step=0.1, clean_period=2.0))
    assert burst.seconds == 0.0
    assert not burst.on_success(100.0)  # saturated work never finds the bucket full
    assert burst.seconds == 0.0


def test_a_tried_burst_that_stays_clean_grows_and_a_429_in_it_halves_and_holds() -> None:
    burst = BurstLearner(BurstSettings(step=0.1, clean_period=2.0, hold=60.0, max_seconds=1.0))
    for t in range(0, 20, 3):
        burst.on_full_burst_spent(float(t))
        burst.on_success(t + 2.5)
    assert burst.seconds == pytest.approx(0.7)
    burst.on_full_burst_spent(30.0)
    assert burst.on_rate_limited(30.5)
    assert burst.seconds == pytest.approx(0.35)
    burst.on_full_burst_spent(40.0)
    assert not burst.on_success(45.0)  # held after the 429
    assert burst.seconds == pytest.approx(0.35)


def test_the_reservation_follows_the_usage_ratio_of_our_count() -> None:
    model = ChargeModel()
    assert model.reserve("tokens", 100) == 100  # nothing known: our count as is
    for _ in range(50):
        model.observe_usage(100, 80, now=0.0)
    assert model.usage_ratio == pytest.approx(0.8)
    assert model.reserve("tokens", 100) == 80
    assert model.charged("tokens", 80) == 80


def test_a_lone_token_429_is_noise_a_confirmed_pair_lifts_to_charges_what_we_count() -> None:
    model = ChargeModel()
    for _ in range(50):
        model.observe_usage(100, 80, now=0.0)
    assert not model.on_rate_limited("tokens", 1.0)  # a lone one: noise, margin unchanged
    assert model.margin("tokens") == 1.0
    assert model.on_rate_limited("tokens", 2.0)  # confirmed: the provider charges our count
    assert model.reserve("tokens", 100) == 100
    assert model.charged("tokens", 80) == 100
    assert model.on_rate_limited("tokens", 2.5, admitted_at=1.9)  # reserved under the old margin
    assert not model.on_rate_limited("tokens", 2.6, admitted_at=2.1)  # within the cooldown: AIMD's
    assert model.margin("tokens") == pytest.approx(1.25)
    assert model.on_rate_limited("tokens", 4.0)  # one step more
    assert model.margin("tokens") == pytest.approx(1.25 * 1.15)
    assert not model.on_rate_limited("tokens", 6.0)  # beyond what charges explain: the rate's fault
    assert not model.on_rate_limited("requests", 7.0)


def test_the_margin_relaxes_after_a_clean_period() -> None:
    model = ChargeModel()
    model.observe_usage(100, 100, now=0.0)
    model.on_rate_limited("tokens", 0.0)
    model.on_rate_limited("tokens", 1.0)
    raised = model.margin("tokens")
    assert raised > 1.0
    model.observe_usage(100, 100, now=100.0)
    assert model.margin("tokens") < raised


def test_a_raised_margin_settles_by_our_count_and_an_unraised_one_by_the_report() -> None:
    model = ChargeModel()
    for _ in range(50):
        model.observe_usage(100, 80, now=0.0)
    assert model.charged("tokens", 70, count=100) == 70  # no margin: what the provider reported
    model.on_rate_limited("tokens", 1.0)
    assert model.on_rate_limited("tokens", 2.0)  # it charges what we count
    # charged by a count like ours: the reservation for our count, whatever the report's spread
    assert model.charged("tokens", 70, count=100) == model.reserve("tokens", 100) == 100
    assert model.charged("tokens", 90, count=100) == 100
    assert model.charged("tokens", 80) == 100  # no count: the report × margin


def test_a_relaxed_margin_refuted_by_a_429_pair_goes_back_to_the_hypothesis_not_past() -> None:
    s = ChargeSettings(relax_by=1.01, relax_period=10.0)
    model = ChargeModel(s)
    for _ in range(50):
        model.observe_usage(100, 80, now=0.0)
    model.on_rate_limited("tokens", 1.0)
    assert model.on_rate_limited("tokens", 2.0)
    assert model.margin("tokens") == pytest.approx(1.25)
    for t in (12.0, 22.0, 32.0):  # three clean periods: three small steps down
        model.observe_usage(100, 80, now=t)
    assert model.margin("tokens") == pytest.approx(1.25 / 1.01**3)
    model.on_rate_limited("tokens", 33.0)
    assert model.on_rate_limited("tokens", 33.5)  # the relaxation was wrong
    assert model.margin("tokens") == pytest.approx(1.25)  # back to "charges what we count" only
    assert model.on_rate_limited("tokens", 36.0)  # at the hypothesis: one step past it, as before
    assert model.margin("tokens") == pytest.approx(1.25 * 1.15)


def test_binding_dimension_from_the_error_type_or_nearly_empty_headers_only() -> None:
    assert binding_dimension("tokens", None) == "tokens"
    assert binding_dimension("input tokens", None) == "input_tokens"
    full = RateLimitSnapshot(
        limit_requests=100, remaining_requests=90, limit_tokens=1000, remaining_tokens=800
    )
    assert binding_dimension("rate_limit_error", full) is None  # nothing near empty: not a rate
    empty = RateLimitSnapshot(
        limit_requests=100, remaining_requests=90, limit_tokens=1000, remaining_tokens=20
    )
    assert binding_dimension(None, empty) == "tokens"


def test_429s_explained_by_what_was_learned_since_the_request_was_priced_raise_nothing() -> None:
    model = ChargeModel()
    assert not model.on_rate_limited("tokens", 0.5)  # before any usage: nothing to weigh, AIMD's
    assert not model.on_rate_limited("tokens", 0.6)
    assert model.margin("tokens") == 1.0
    for _ in range(50):
        model.observe_usage(100, 150, now=1.0)  # the provider charges 1.5x our count, and says so
    assert model.on_rate_limited("tokens", 1.1, reserved=1.0)  # priced at our count, before that
    assert model.on_rate_limited("tokens", 1.2, reserved=1.0)
    assert model.margin("tokens") == 1.0  # no pair held against today's factor
    assert not model.on_rate_limited("tokens", 1.3, reserved=1.5)  # priced right: a lone one
    assert model.on_rate_limited("tokens", 1.4, reserved=1.5)  # a pair: the margin rises
    assert model.margin("tokens") == pytest.approx(1.15)


def test_a_margin_raised_before_usage_rose_gives_way_to_the_usage_ratio() -> None:
    model = ChargeModel()
    for _ in range(5):
        model.observe_usage(100, 100, now=0.0)
    model.on_rate_limited("tokens", 1.0)
    model.on_rate_limited("tokens", 1.5)  # a confirmed pair at usage ratio 1: margin 1.15
    assert model.factor("tokens") == pytest.approx(1.15)
    for _ in range(400):
        model.observe_usage(100, 140, now=2.0)  # usage now shows what the margin stood for
    assert model.margin("tokens") == pytest.approx(1.0)
    assert model.factor("tokens") == pytest.approx(model.usage_ratio)


def test_429s_before_any_usage_are_judged_again_once_usage_is_in() -> None:
    model = ChargeModel()
    assert not model.explains_blind()  # nothing left to the AIMD blind
    assert not model.on_rate_limited("tokens", 0.5, reserved=1.0)  # before usage: the AIMD's, for now
    for _ in range(5):
        model.observe_usage(100, 150, now=1.0)  # it charges 1.5x what those were reserved at
    assert model.explains_blind()
    assert not model.explains_blind()  # forgotten once asked
    exact = ChargeModel()
    assert not exact.on_rate_limited("tokens", 0.5, reserved=1.0)
    exact.observe_usage(100, 100, now=1.0)  # it charges what we count: the rate was at fault
    assert not exact.explains_blind()


def test_usage_noise_around_a_raised_margin_moves_neither_way_the_factor_it_confirmed() -> None:
    model = ChargeModel(ChargeSettings(memory=10.0))
    for _ in range(50):
        model.observe_usage(100, 80, now=0.0)
    model.on_rate_limited("tokens", 1.0)
    assert model.on_rate_limited("tokens", 2.0)
    confirmed = model.factor("tokens")
    assert confirmed == pytest.approx(1.0)  # "it charges what we count"
    for reported in (90, 90, 70, 70, 70, 85, 75):  # the report wanders up and back down
        model.observe_usage(100, reported, now=3.0)
        assert model.factor("tokens") == pytest.approx(confirmed)


def test_a_relaxation_step_refuted_by_one_429_is_undone_and_the_next_waits_twice_as_long() -> None:
    model = ChargeModel(ChargeSettings(relax_by=1.004, relax_period=10.0))
    for _ in range(50):
        model.observe_usage(100, 80, now=0.0)
    model.on_rate_limited("tokens", 1.0)
    assert model.on_rate_limited("tokens", 2.0)
    lifted = model.margin("tokens")
    model.observe_usage(100, 80, now=12.0)  # a clean period: one step down
    assert model.margin("tokens") == pytest.approx(lifted / 1.004)
    assert not model.on_rate_limited("tokens", 13.0, admitted_at=11.5)  # sent before the step: lone
    assert model.on_rate_limited("tokens", 14.0, admitted_at=12.5)  # after it, within its period
    assert model.margin("tokens") == pytest.approx(lifted)  # undone at once, by one 429
    model.observe_usage(100, 80, now=30.0)  # 16 s clean: no step, the period is 20 s now
    assert model.margin("tokens") == pytest.approx(lifted)
    model.observe_usage(100, 80, now=35.0)
    assert model.margin("tokens") == pytest.approx(lifted / 1.004)
