"""A provider's `remaining` as evidence (issue #28): capacity others took and gave back. Room in its
bucket steps the rate up at once (past the last cut point, and a charge margin the 429s raised back
down), a step that empties it is undone before any 429, no room holds the additive increase, and a
provider that refuses while it reports room is believed no more (its headers lie)."""

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
