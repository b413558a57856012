"""The window log: what one dimension admitted within the last window, and when room returns;
and the pool that uses it sending whole requests up to the limit, never past it."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from batchgate.clock import FakeClock
from batchgate.models import Cost, Usage
from batchgate.quota import QuotaLimits, QuotaPool
from batchgate.quota.dimension import COLD_JITTER, JITTER, TIMER_SLACK
from batchgate.quota.limits import ABANDONED
from batchgate.quota.window import WindowLog


def test_admits_up_to_the_cap_then_waits_for_the_oldest_to_leave() -> None:
    log = WindowLog(1.0)
    assert log.time_until(10, cap=30, now=0.0) == 0.0
    log.add(10, 0.0)
    log.add(10, 0.2)
    log.add(10, 0.4)
    assert log.total(0.5) == 30
    assert log.time_until(10, cap=30, now=0.5) == pytest.approx(0.5)  # the first leaves at 1.0
    assert log.time_until(15, cap=30, now=0.5) == pytest.approx(0.7)  # needs the first two gone
    assert log.time_until(10, cap=30, now=1.0) == 0.0
    assert log.total(1.0) == 20


def test_a_request_bigger_than_the_cap_waits_for_an_empty_window() -> None:
    log = WindowLog(1.0)
    log.add(5, 0.0)
    log.add(5, 0.3)
    assert log.time_until(50, cap=30, now=0.4) == pytest.approx(0.9)
    assert WindowLog(1.0).time_until(50, cap=30, now=0.0) == 0.0


def test_corrections_count_while_the_entry_is_in_the_window_only() -> None:
    log = WindowLog(1.0)
    first = log.add(10, 0.0)
    log.adjust(first, 5)  # the provider charged more than reserved
    assert log.total(0.5) == 15
    log.adjust(first, -20)  # refunded: never below nothing
    assert log.total(0.5) == 0
    second = log.add(10, 0.6)
    assert log.total(1.2) == 10  # the first has left
    log.adjust(first, 7)
    assert log.total(1.2) == 10  # a correction after it left changes nothing
    log.adjust(second, -4)
    assert log.total(1.2) == 6


def test_a_request_that_left_late_counts_from_then_and_holds_those_behind_it() -> None:
    log = WindowLog(1.0)
    late = log.add(10, 0.0)
    log.add(10, 0.1)
    log.restamp(late, 0.3)  # waited for an in-flight place
    assert log.total(1.05) == 20  # the second would have left at 1.1; the first only at 1.3
    assert log.time_until(10, cap=20, now=1.05) == pytest.approx(0.25)
    assert log.total(1.3) == 0
    log.restamp(late, 2.0)  # already gone: nothing comes back
    assert log.total(2.0) == 0


def test_requests_sent_before_any_answer_are_held_for_the_cold_jitter() -> None:
    log = WindowLog(1.0 + JITTER, cold_span=1.0 + COLD_JITTER)
    log.add(1, 0.0)
    log.add(1, 0.0, cold=True)
    assert log.total(1.0 + JITTER) == 1
    assert log.total(1.0 + COLD_JITTER + 1e-9) == 0


def test_the_span_must_be_positive() -> None:
    with pytest.raises(ValueError, match="span"):
        WindowLog(0.0)


async def _admissions(pool: QuotaPool, clock: FakeClock, n: int) -> list[float]:
    """Admit `n` one-request costs one after another on the fake clock; their admission times."""
    times: list[float] = []
    for _ in range(n):
        task = asyncio.ensure_future(pool.acquire(Cost(requests=1)))
        while not task.done():
            await asyncio.sleep(0)
            deadline = clock.next_deadline()
            if not task.done() and deadline is not None:
                clock.advance(max(0.0, deadline - clock.now()))
        pool.settle(task.result(), ABANDONED)  # answered: later requests reuse its connection (not cold)
        times.append(clock.now())
    return times


def _most_in_any_window(times: list[float], window: float) -> int:
    most, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        most = max(most, end - start + 1)
    return most


async def test_a_pool_sends_whole_requests_up_to_the_limit_and_never_past_it() -> None:
    clock = FakeClock()
    pool = QuotaPool("local", QuotaLimits(rpm=1200), clock)  # 20 a second, no burst: one request
    times = await _admissions(pool, clock, 200)
    assert _most_in_any_window(times, 1.0) <= 20
    rate = (len(times) - 1) / (times[-1] - times[0])
    # smooth sending alone keeps one request of headroom (19/s at most); the log fills the window
    assert rate > 19.2, rate
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # still evenly spaced at the rate × safety (a timer's late credit aside): no burst
    assert min(gaps) >= 1 / (20 * 0.99) - TIMER_SLACK - 1e-9


async def test_a_raised_charge_margin_reprices_open_requests_and_scales_answered_ones() -> None:
    clock = FakeClock()
    pool = QuotaPool("chars", QuotaLimits(tpm=60_000), clock)  # 1,000 a second, no burst: a log
    answered = await pool.acquire(Cost(tokens=110, input_tokens=100, output_tokens=10), count=100)
    pool.reconcile(answered, Usage(prompt_tokens=100, completion_tokens=5), count=100)
    clock.advance(0.2)
    open_ = await pool.acquire(Cost(tokens=110, input_tokens=100, output_tokens=10), count=100)
    window = pool._dims["tokens"].window
    assert window.total(clock.now()) == pytest.approx(220)
    # 429s showed the provider charges 1.5x what it reports: both requests took more than we hold
    pool.charge_raised("tokens", 1.5)
    assert open_.charged["tokens"] == pytest.approx(160)  # its prompt re-priced: 100 -> 150
    assert open_.repriced["tokens"] == pytest.approx(50)  # so its answer settles against that
    assert window.total(clock.now()) == pytest.approx(110 * 1.5 + 160)
    pool.charge_raised("requests", 2.0)  # no such dimension here: nothing changes
    pool.charge_raised("tokens", 1.0)
    assert window.total(clock.now()) == pytest.approx(110 * 1.5 + 160)
