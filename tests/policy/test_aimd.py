"""AIMD: multiplicative cuts on 429, damping within the cooldown, additive recovery."""

from __future__ import annotations

import pytest

from batchgate.policy.aimd import AimdController, AimdSettings


def test_cut_is_multiplicative() -> None:
    c = AimdController(AimdSettings(decrease=0.5, cooldown=1.0))
    assert c.on_rate_limited(10.0)
    assert c.factor == 0.5
    assert c.on_rate_limited(11.0)
    assert c.factor == 0.25
    assert c.cuts == 2
    assert c.rate_limited == 2


def test_burst_of_429s_is_damped() -> None:
    c = AimdController(AimdSettings(decrease=0.7, cooldown=1.0))
    results = [c.on_rate_limited(10.0 + i * 0.01) for i in range(50)]  # 50 errors in half a second
    assert results[0]
    assert not any(results[1:])
    assert c.factor == pytest.approx(0.7)
    assert c.rate_limited == 50
    assert c.cuts == 1


def test_the_cooldown_damps_only_429s_for_requests_admitted_before_the_cut() -> None:
    c = AimdController(AimdSettings(decrease=0.7, cooldown=1.0))
    assert c.on_rate_limited(10.0, admitted_at=9.9)
    # answers to what was sent at the old rate: damped
    assert not c.on_rate_limited(10.2, admitted_at=9.95)
    assert not c.on_rate_limited(10.3, admitted_at=10.0)
    assert c.factor == pytest.approx(0.7)
    # sent at the cut rate and still refused: a verdict on that rate, at once
    assert c.on_rate_limited(10.4, admitted_at=10.35)
    assert c.factor == pytest.approx(0.49)
    assert not c.on_rate_limited(10.5, admitted_at=10.3)  # before the second cut: damped again
    assert c.cuts == 2


def test_floor() -> None:
    c = AimdController(AimdSettings(decrease=0.5, min_factor=0.2, cooldown=0.0))
    for i in range(10):
        c.on_rate_limited(float(i))
    assert c.factor == 0.2
    assert c.cuts == 3  # 0.5, 0.25 → floored at 0.2, then nothing left to cut
    assert not c.on_rate_limited(100.0)


def test_additive_recovery_after_clean_periods() -> None:
    c = AimdController(AimdSettings(decrease=0.5, increase=0.1, clean_period=2.0, cooldown=1.0))
    c.on_rate_limited(0.0)
    assert not c.on_success(1.9)  # not yet a clean period
    assert c.on_success(2.0)
    assert c.factor == pytest.approx(0.6)
    assert not c.on_success(3.0)  # one increase per clean period
    assert c.on_success(4.0)
    assert c.factor == pytest.approx(0.7)
    for t in range(5, 30):
        c.on_success(float(t))
    assert c.factor == pytest.approx(0.9)  # held one step below the rate that provoked the cut
    c.on_success(30.0)
    assert c.factor == 1.0  # probed past it after probe_period
    assert not c.on_success(100.0)  # nothing to restore


def test_recovery_settles_below_the_last_cut_point_then_probes() -> None:
    settings = AimdSettings(decrease=0.5, increase=0.1, clean_period=1.0, cooldown=0.0, probe_period=20.0)
    c = AimdController(settings)
    c.on_rate_limited(0.0)  # 1.0 → 0.5
    for t in range(1, 10):
        c.on_success(float(t))
    assert c.factor == pytest.approx(0.9)
    assert c.on_rate_limited(10.0)  # at 0.9 it overshot again: 0.45, ceiling 0.9
    for t in range(11, 30):
        c.on_success(float(t))
    assert c.factor == pytest.approx(0.85)  # as close to 0.9 as the steps allow, not past it
    assert c.on_success(31.0)
    assert c.factor == pytest.approx(0.95)


def test_damped_429_still_resets_the_clean_period() -> None:
    c = AimdController(AimdSettings(decrease=0.5, increase=0.1, clean_period=2.0, cooldown=1.0))
    c.on_rate_limited(0.0)
    assert not c.on_rate_limited(0.5)  # damped, but not clean either
    assert not c.on_success(2.0)
    assert c.on_success(2.5)


def test_rescale_undoes_explained_cuts() -> None:
    c = AimdController(AimdSettings(decrease=0.5, cooldown=0.0))
    c.on_rate_limited(0.0)
    c.on_rate_limited(1.0)
    assert c.factor == 0.25
    c.rescale(2.0)
    assert c.factor == 0.5
    c.rescale(10.0)
    assert c.factor == 1.0
    with pytest.raises(ValueError, match="positive"):
        c.rescale(0.0)


def test_repr_and_validation() -> None:
    c = AimdController()
    c.on_rate_limited(0.0)
    assert "factor=0.700" in repr(c)
    with pytest.raises(ValueError, match="decrease"):
        AimdSettings(decrease=0.0)
    with pytest.raises(ValueError, match="min_factor"):
        AimdSettings(min_factor=0.0)


def test_sparse_429s_among_many_successes_are_noise() -> None:
    c = AimdController(AimdSettings(noise_ratio=0.02, noise_window=5.0, cooldown=0.0))
    t = 0.0
    for i in range(2500):  # 100 answers/s; after 5 s, 1 % of them are 429s
        t += 0.01
        if i >= 500 and i % 100 == 50:
            assert not c.on_rate_limited(t)
        else:
            c.on_success(t)
    assert c.factor == 1.0
    assert c.rate_limited == 20
    # a real overshoot: a quarter of the answers are 429s
    cuts = 0
    for i in range(200):
        t += 0.01
        if i % 4 == 0:
            cuts += c.on_rate_limited(t)
        else:
            c.on_success(t)
    assert cuts >= 1
    assert c.factor < 1.0


def test_noise_does_not_break_a_clean_period() -> None:
    c = AimdController(AimdSettings(decrease=0.5, increase=0.1, clean_period=2.0, cooldown=1.0))
    assert c.on_rate_limited(0.0)
    t = 0.0
    increased = False
    for i in range(400):  # 4 s of 100 answers/s with one stray 429 at 3 s
        t += 0.01
        if i == 300:
            c.on_rate_limited(t)
        else:
            increased |= c.on_success(t)
    assert increased
    assert c.factor > 0.5


def test_cuts_made_blind_are_undone_together_until_a_cut_that_is_not() -> None:
    c = AimdController(AimdSettings(decrease=0.5, cooldown=0.0, noise_ratio=0.0))
    assert c.on_rate_limited(10.0, blind=True)
    assert c.on_rate_limited(10.5, 10.2, blind=True)
    assert c.factor == 0.25
    assert c.excuse_blind()  # usage explained both: back to where they found it
    assert c.factor == 1.0
    assert not c.excuse_blind()  # once
    assert c.on_rate_limited(11.0, 10.9, blind=True)
    assert c.on_rate_limited(11.5, 11.4)  # a cut with usage in: the rate is at fault
    assert not c.excuse_blind()
    assert c.factor == 0.25
