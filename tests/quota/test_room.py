"""A provider's `remaining` as evidence (issue #28): capacity others took and gave back. Room in its
bucket steps the rate up at once (past the last cut point, and a charge margin the 429s raised back
down), a step that empties it is undone before any 429, no room holds the additive increase, and a
provider that refuses while it reports room is believed no more (its headers lie). Once the
provider has shown a bucket (room while we send at the rate), its level draining or filling while
requests wait moves the rate by as much, before any 429, and a 429 at an emptied bucket cuts. A
fixed window restarting (its level leaping back to full) is no room for a charge margin."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.models import Cost, RateLimitSnapshot
from batchgate.policy.aimd import AimdController, AimdSettings
from batchgate.quota.charge import ChargeModel
from batchgate.quota.pool import QuotaLimits, QuotaPool

TPM = 60_000


def _cut_twice() -> AimdController:
    c = AimdController(AimdSettings(decrease=0.7, cooldown=0.0))
    c.on_rate_limited(1.0)
    c.on_rate_limited(2.0)
    assert c.factor == pytest.approx(0.49)
    return c


def test_room_steps_the_factor_up_at_once_past_the_last_cut_point() -> None:
    c = _cut_twice()
    s = c.settings
    assert c.on_room(3.0, fill=1.0)  # the colleague has gone: the bucket fills
    assert c.factor == pytest.approx(0.49 + s.room_step)
    assert not c.on_room(3.0 + s.room_settle / 2, fill=1.0)  # one step per settle
    steps = 1
    now = 3.0
    while c.factor < 1.0:
        now += s.room_settle
        assert c.on_room(now, fill=1.0)
        steps += 1
    assert steps * s.room_settle <= 3.0  # the whole rate back within a few seconds, no probe wait


def test_a_step_that_empties_the_bucket_is_undone_and_no_room_holds_the_increase() -> None:
    c = _cut_twice()
    s = c.settings
    c.on_room(3.0, fill=1.0)
    assert c.factor == pytest.approx(0.49 + s.room_step)
    assert c.on_room(3.0 + s.room_settle, fill=0.1)  # a steady neighbour: past what is left
    assert c.factor == pytest.approx(0.49)
    assert c.rate_limited == 2  # back before any 429
    assert not c.on_success(100.0)  # no room: the additive increase waits
    c.on_room(100.0, fill=0.5)
    assert c.on_success(100.1)  # some room: the clean periods raise it again


def test_a_provider_that_refuses_while_it_reports_room_is_no_evidence() -> None:
    c = AimdController(AimdSettings(decrease=0.7, cooldown=0.0))
    c.on_room(0.5, fill=1.0)  # what its headers say: plenty left (they report more than it enforces)
    c.on_rate_limited(1.0)
    assert not c.room_trusted
    assert not c.on_room(5.0, fill=1.0)
    assert c.factor == pytest.approx(0.7)


def test_room_steps_a_raised_charge_margin_back_and_an_emptied_bucket_undoes_it() -> None:
    model = ChargeModel()
    for _ in range(50):
        model.observe_usage(100, 80, now=0.0)
    model.on_rate_limited("tokens", 1.0)
    model.on_rate_limited("tokens", 2.0)  # a confirmed pair (a colleague's traffic, in truth)
    raised = model.margin("tokens")
    assert raised == pytest.approx(1.25)
    assert not model.on_room("tokens", 1.0, now=2.5)  # within the cooldown of the raise
    assert model.on_room("tokens", 1.0, now=4.0)
    assert model.margin("tokens") == pytest.approx(raised / model.settings.raise_by)
    assert model.on_room("tokens", 0.1, now=4.5)  # it did charge that much: undone
    assert model.margin("tokens") == pytest.approx(raised)


async def test_a_pool_reads_room_from_minute_style_headers() -> None:
    clock = FakeClock()
    pool = QuotaPool("p", QuotaLimits(tpm=TPM, safety=1.0), clock, AimdSettings(cooldown=0.0))
    res = await pool.acquire(Cost(tokens=10))
    pool.on_rate_limited(res)
    clock.advance(1.0)
    pool.on_rate_limited()
    cut = pool.learning.aimd.factor
    assert cut < 0.6
    clock.advance(1.0)
    full = RateLimitSnapshot(limit_tokens=TPM, remaining_tokens=TPM)  # the provider's bucket is full
    assert pool.calibrate(full)
    assert pool.learning.aimd.factor > cut
    assert pool.statistics().effective_per_second["tokens"] == pytest.approx(
        TPM / 60 * pool.learning.aimd.factor
    )


def _proven(fill: float = 1.0) -> AimdController:
    """A controller whose provider has shown room for a second while requests waited (a bucket)."""
    c = AimdController(AimdSettings(prior_answers=20.0))
    for i in range(5):
        c.on_room(0.25 * i, fill=fill, busy=True)
    assert c.bucket_seen
    return c


def test_room_while_we_send_at_the_rate_shows_a_bucket_not_a_window() -> None:
    s = AimdSettings()
    window = AimdController(s)  # a window we fill ourselves: its room is gone within its length
    for i, fill in enumerate((1.0, 0.6, 0.2, 0.05, 0.04, 0.05)):
        window.on_room(0.25 * i, fill=fill, busy=True)
    assert not window.bucket_seen
    idle = AimdController(s)  # room while nothing waits says nothing: we did not ask for it
    for i in range(8):
        idle.on_room(0.25 * i, fill=1.0, busy=False)
    assert not idle.bucket_seen
    assert _proven(fill=0.6).bucket_seen  # a bucket others drain still shows room for a while


def test_a_bucket_others_drain_cuts_the_factor_by_as_much_before_any_429() -> None:
    c = _proven()
    s = c.settings
    now, fill = 1.0, 1.0
    while c.factor == 1.0 and now < 5.0:  # a neighbour takes 30%: the level falls 0.3 a second
        now += 0.1
        fill -= 0.03
        c.on_room(now, fill=fill, busy=True)
    assert c.factor == pytest.approx(0.7, abs=0.05)
    assert c.rate_limited == 0
    assert fill > s.room_none  # well before the bucket is empty
    cut = c.factor
    for i in range(1, 20):  # not waiting to send: the level moving says nothing about our rate
        c.on_room(now + 0.1 * i, fill=fill - 0.03 * i, busy=False)
    assert c.factor == cut


def test_capacity_given_back_raises_the_factor_by_what_the_level_gains() -> None:
    c = _proven()
    for i in range(1, 30):  # the colleague takes half: the level drains, the factor follows
        c.on_room(1.0 + 0.1 * i, fill=max(0.35, 1.0 - 0.05 * i), busy=True)
    assert c.factor <= 0.6
    low, now, fill = c.factor, 4.0, 0.35
    c.on_room(now, fill=fill, busy=True)
    while c.factor < 1.0 and now < 7.0:  # it leaves: the level climbs half a bucket a second
        now += 0.1
        fill = min(1.0, fill + 0.05)
        c.on_room(now, fill=fill, busy=True)
    assert c.factor == 1.0
    assert now - 4.0 <= 2.0  # the whole rate back within two seconds, not by clean periods
    assert low < 1.0


def test_a_429_from_a_bucket_seen_emptied_is_a_verdict_not_noise() -> None:
    noisy = AimdController(AimdSettings(prior_answers=20.0))
    assert not noisy.on_rate_limited(1.0)  # one 429 among many answers: noise
    c = _proven()
    c.on_room(1.5, fill=0.02, busy=True)  # others emptied it
    before = c.factor
    assert c.on_rate_limited(1.6)
    assert c.factor == pytest.approx(before * c.settings.decrease)


def test_a_level_that_leaps_back_to_full_is_a_window_and_never_a_bucket() -> None:
    c = _proven()
    c.on_room(1.2, fill=0.05, busy=True)
    c.on_room(1.25, fill=1.0, busy=True)  # a fixed window restarted: no bucket refills that fast
    assert c.window_seen
    assert not c.bucket_seen
    factor = c.factor
    for i in range(1, 30):  # its sawtooth is no evidence of others, and never proves a bucket
        c.on_room(1.25 + 0.1 * i, fill=1.0 - 0.1 * (i % 10), busy=True)
    assert not c.bucket_seen
    assert c.factor >= factor


def test_a_level_that_moves_by_a_request_or_two_says_nothing() -> None:
    c = _proven()
    for i in range(1, 20):  # 5 requests a second: each is a fifth of the bucket, its level jumps
        c.on_room(1.0 + 0.25 * i, fill=(0.7, 0.55, 0.4)[i % 3], busy=True, grain=0.2)
    assert c.factor == 1.0


async def _margin_raised(clock: FakeClock) -> QuotaPool:
    """A pool whose provider charges what we count (characters ÷ 4, say) but reports 0.8 of it in
    `usage`: a confirmed pair of token 429s raised the margin to that hypothesis (factor 1)."""
    pool = QuotaPool("p", QuotaLimits(tpm=TPM, safety=1.0), clock)
    for _ in range(50):
        pool.observe_usage(100, 80)
    charges, now = pool.learning.charges, clock.now()
    charges.on_rate_limited("tokens", now - 1.0)
    charges.on_rate_limited("tokens", now)
    assert charges.factor("tokens") == pytest.approx(1.0)
    return pool


def _headers(fill: float) -> RateLimitSnapshot:
    return RateLimitSnapshot(limit_tokens=TPM, remaining_tokens=fill * TPM)


async def test_a_fixed_window_restarting_is_no_room_for_a_charge_margin() -> None:
    # Minute-style headers of a one-second fixed window we fill at the confirmed factor: nearly
    # empty at its end, its whole allowance back at the next boundary. That leap is the window
    # restarting, not room: a margin stepped down there priced the rest of the window below what
    # the provider charges, and it refused the window's last requests (issue #28's
    # `1 · fixed_window · chars · minute` cell: 0.6-0.8% 429s).
    clock = FakeClock()
    pool = await _margin_raised(clock)
    charges = pool.learning.charges
    clock.advance(0.2)
    pool.calibrate(_headers(1.0))  # a window starts (minute-style: within the raise's cooldown)
    clock.advance(0.7)
    pool.calibrate(_headers(0.05))  # ... and ends, nearly empty
    clock.advance(0.1)
    pool.calibrate(_headers(1.0))  # the next one starts: a leap no bucket refills that fast
    assert pool.learning.aimd.window_seen
    assert charges.factor("tokens") == pytest.approx(1.0)
    assert pool.priced(Cost(tokens=110, output_tokens=10), 100).tokens == 110  # what it charges
    for _ in range(5):  # boundary after boundary
        clock.advance(0.9)
        pool.calibrate(_headers(0.05))
        clock.advance(0.1)
        pool.calibrate(_headers(1.0))
    assert charges.factor("tokens") == pytest.approx(1.0)


async def test_a_bucket_that_stays_full_still_steps_a_charge_margin_back() -> None:
    # The same margin where the provider's level stays full (a bucket others drained, then left):
    # room, and the margin steps back toward the usage ratio, as before.
    clock = FakeClock()
    pool = await _margin_raised(clock)
    for _ in range(5):
        clock.advance(0.25)
        pool.calibrate(_headers(1.0))
    assert not pool.learning.aimd.window_seen
    assert pool.learning.charges.factor("tokens") < 1.0
