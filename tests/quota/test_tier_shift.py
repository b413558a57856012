"""A tier that halves for a while, its rate-limit headers reporting the new limits at once (issue 39's
shift row, `bench/quota_rows.py`). The lower limit is adopted from the headers, and when the tier
comes back the whole rate is taken back at once: the level the headers then report is a share of
the restored (doubled) limit, and read as a share of the halved one it looked like others draining
the bucket — the factor was cut by half as the capacity came back (since 50d7114 followed the
level's trend; the row paced 0.92 against 0.95 at 8782eca). Judged on a FakeClock over real sockets."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.config import config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.gateway import Gateway
from batchgate.models import RateLimitSnapshot
from batchgate.quota.pool import QuotaLimits, QuotaPool
from clocks import on_fake_time

RPM, TPM = 6_000, 300_000
HALF = {"rpm": RPM // 2, "tpm": TPM // 2}
DOWN, UP = 2.0, 6.0  # the tier is halved over [DOWN, UP) (emulator time)
PROMPT = "label this review: " + "the delivery came early and the packaging was sturdy " * 8


def _snapshot(limit: int, fill: float) -> RateLimitSnapshot:
    return RateLimitSnapshot(limit_tokens=limit, remaining_tokens=int(limit * fill))


def test_a_tier_that_comes_back_is_no_bucket_drained_by_others() -> None:
    clock = FakeClock()
    pool = QuotaPool("p", QuotaLimits(tpm=TPM, safety=1.0), clock)
    aimd, now = pool.learning.aimd, 0.0
    for _ in range(12):  # room while requests wait, at the full tier then the halved one
        now += 0.25
        clock.advance(0.25)
        pool.learning.calibrate(_snapshot(TPM if now < 1.5 else TPM // 2, 0.9), now, busy=True)
    assert aimd.bucket_seen
    assert aimd.factor == 1.0
    for fill in (0.55, 0.6, 0.65, 0.7):  # the tier back: more room than before, of a larger whole
        now += 0.25
        clock.advance(0.25)
        pool.learning.calibrate(_snapshot(TPM, fill), now, busy=True)
    assert aimd.factor == 1.0  # was cut to 0.5: the change of scale read as a drain
    assert pool.statistics().effective_per_second["tokens"] == pytest.approx(TPM / 60)


def test_anthropics_tightest_bucket_flipping_is_no_change_of_tier() -> None:
    """Anthropic's `tokens` headers report whichever bucket is tightest, so their limit flips
    between ITPM's and OTPM's from one answer to the next: not a limit of the pool's own
    dimensions, it leaves the level's trend alone (others draining the input bucket still cut)."""
    itpm, otpm = 120_000, 60_000
    clock = FakeClock()
    pool = QuotaPool("p", QuotaLimits(itpm=itpm, otpm=otpm, safety=1.0), clock)
    aimd, now, fill = pool.learning.aimd, 0.0, 0.9
    for i in range(40):  # room while requests wait, then a neighbour drains 0.3 of a bucket a second
        now += 0.1
        clock.advance(0.1)
        fill -= 0.03 if i >= 15 else 0.0
        tightest = (itpm, int(itpm * fill)) if i % 2 else (otpm, int(otpm * 0.95))
        snapshot = RateLimitSnapshot(
            limit_input_tokens=itpm,
            remaining_input_tokens=int(itpm * fill),
            limit_tokens=tightest[0],
            remaining_tokens=tightest[1],
        )
        pool.learning.calibrate(snapshot, now, busy=True)
    assert aimd.bucket_seen
    assert aimd.factor < 0.9  # was 1.0: every flip started the trend again


async def _shift_run(n: int) -> tuple[float, int, int]:
    """(pace over what the tier left, answered, the provider's 429s) for `n` requests."""
    clock = FakeClock()
    entry = {
        "name": "alpha",
        "family": "openai",
        "limits": {"rpm": RPM, "tpm": TPM},
        "latency": {"ttft_p50_ms": 300, "ttft_sigma": 0.4, "per_token_ms": 8},
        "enforcement": {"kind": "token_bucket", "burst_seconds": 1.0},
        "headers": "minute",
        "limit_changes": [{"at": DOWN, **HALF}, {"at": UP, "rpm": RPM, "tpm": TPM}],
    }
    emu = Emulator(emulator_config_from_dict({"seed": 7, "providers": [entry]}), clock=clock)
    await emu.start()
    try:
        target = {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")}
        config = config_from_dict(
            {
                "providers": [{**target, "limits": {"rpm": RPM, "tpm": TPM}}],
                "routes": [{"model": "m", "targets": ["alpha"]}],
            },
            environ={},
        )
        bodies = [
            {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": f"{i} {PROMPT}"}]}
            for i in range(n)
        ]
        async with Gateway(config, clock=clock) as gw:
            results = await on_fake_time(clock, gw.abatch(bodies))
        stats = emu.stats()["providers"]["alpha"]
    finally:
        await emu.stop()
    first, last = stats["first_request_s"], stats["last_success_admitted_s"]
    left = (last - first) - 0.5 * max(0.0, min(last, UP) - max(first, DOWN))  # what the tier left
    pace = stats["tokens_charged"]["total"] / (TPM / 60) / left
    return pace, sum(r.ok for r in results), stats["rejected"]["rate_limit"]


async def test_the_whole_rate_is_taken_back_when_the_tier_returns() -> None:
    pace, answered, refused = await _shift_run(400)
    assert answered == 400
    assert refused <= 6  # 1.5%
    assert pace >= 0.93  # 0.9 while the restored tier was read as a drained bucket
