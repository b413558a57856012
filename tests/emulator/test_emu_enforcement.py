"""The enforcement algorithms on a fake clock (time passed in): sliding and fixed windows, the token
bucket through the same seam, limit changes, header styles — and their guarantees as properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.emulator.config import LimitChange, Limits
from batchgate.emulator.enforcement import FixedWindow, Limiter, SlidingWindow, TokenBucket, make_limiter
from batchgate.emulator.limiter import Quota, RequestCost
from batchgate.emulator.modes import Enforcement


def admit_greedily(limiter: Limiter, arrivals: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """Offer each (gap, cost) in turn; admit it when the limiter says it fits now."""
    now, admitted = 0.0, []
    for gap, cost in arrivals:
        now += gap
        if not limiter.never_fits(cost) and limiter.wait_time(cost, now) == 0:
            limiter.charge(cost, now)
            admitted.append((now, cost))
    return admitted


def test_sliding_window_admits_its_allowance_then_waits_for_the_oldest_to_leave() -> None:
    window = SlidingWindow(600, 1.0, now=0.0)  # 10 requests in any 1 s
    for i in range(10):
        assert window.wait_time(1, i * 0.05) == 0
        window.charge(1, i * 0.05)
    assert window.wait_time(1, 0.5) == pytest.approx(0.5)  # the first leaves at 1.0
    assert window.wait_time(3, 0.5) == pytest.approx(0.6)  # three must leave: the third at 1.1
    assert window.wait_time(1, 1.0) == 0
    assert window.remaining(1.0) == pytest.approx(1)
    assert window.seconds_until_full(1.0) == pytest.approx(0.45)  # the last leaves at 1.45


def test_sliding_window_has_no_burst_beyond_the_window_unlike_a_half_second_bucket() -> None:
    """A bucket that starts with 0.5 s of burst overruns a 1 s sliding window by half."""
    sends = [(0.0 if i == 0 else 0.01, 1) for i in range(100)]  # 100 requests in 1 s
    bucket = admit_greedily(TokenBucket(600, 0.5, now=0.0), sends)
    window = admit_greedily(SlidingWindow(600, 1.0, now=0.0), sends)
    assert sum(c for t, c in bucket if t < 1.0) == 14  # 5 of burst + 9.9 refilled by t = 0.99
    assert sum(c for t, c in window if t < 1.0) == 10


def test_sliding_window_takes_a_big_request_only_when_empty_and_holds_it_longer() -> None:
    window = SlidingWindow(6000, 1.0, now=0.0)  # 100 tokens per 1 s
    window.charge(10, 0.0)
    assert window.wait_time(250, 0.2) == pytest.approx(0.8)  # waits for an empty window
    window.charge(250, 1.0)
    assert window.wait_time(1, 1.0) == pytest.approx(2.5)  # 250 tokens stay for 2.5 windows
    assert window.wait_time(1, 3.5) == 0
    assert math.isinf(window.wait_time(6001, 100.0))


def test_fixed_window_resets_at_its_boundaries() -> None:
    window = FixedWindow(600, 1.0, now=0.25)  # boundaries at 0.25 + k
    for _ in range(10):
        window.charge(1, 0.9)
    assert window.wait_time(1, 0.9) == pytest.approx(0.35)
    assert window.remaining(0.9) == 0
    assert window.seconds_until_full(0.9) == pytest.approx(0.35)
    assert window.wait_time(10, 1.25) == 0  # a whole fresh window just after the boundary
    assert window.remaining(1.25) == 10


def test_fixed_window_carries_a_big_request_into_the_next_windows() -> None:
    window = FixedWindow(6000, 1.0, now=0.0)  # 100 per window
    window.charge(20, 0.1)
    assert window.wait_time(250, 0.1) == pytest.approx(0.9)  # only into an empty window
    window.charge(250, 1.0)
    assert window.wait_time(1, 1.5) == pytest.approx(1.5)  # 150 carried into [2, 3): full until 3
    assert window.wait_time(50, 2.0) == pytest.approx(1.0)
    assert window.wait_time(50, 3.0) == 0


@pytest.mark.parametrize("kind", ["sliding_window", "fixed_window"])
def test_windows_keep_what_was_charged_across_a_limit_change(kind: str) -> None:
    quota = Quota(
        Limits(rpm=600),
        None,
        (LimitChange(0.5, Limits(rpm=60)),),
        1.0,
        0.0,
        Enforcement(kind, 1.0),  # type: ignore[arg-type]
    )
    cost = RequestCost(tokens=0, input_tokens=0, output_tokens=0)
    for _ in range(5):
        assert quota.try_admit(cost, 0.1)[1] is None
    quota.advance(0.5)
    assert quota.enforced["requests"].limit == 60
    assert quota.try_admit(cost, 0.5)[1] == "requests"  # one per second, five already charged


@pytest.mark.parametrize("kind", ["token_bucket", "sliding_window", "fixed_window"])
def test_header_styles_scale_remaining_to_the_minute_or_report_the_window(kind: str) -> None:
    quota = Quota(Limits(rpm=600, tpm=60_000), None, (), 1.0, 0.0, Enforcement(kind, 2.0))  # type: ignore[arg-type]
    assert quota.try_admit(RequestCost(tokens=500, input_tokens=400, output_tokens=100), 0.0)[1] is None
    minute = {s.dimension: s for s in quota.snapshot(0.0, "minute")}
    window = {s.dimension: s for s in quota.snapshot(0.0, "window")}
    assert (minute["requests"].remaining, window["requests"].remaining) == (570, 19)  # 20 per 2 s
    assert (minute["tokens"].remaining, window["tokens"].remaining) == (45_000, 1500)
    assert minute["tokens"].limit == window["tokens"].limit == 60_000
    assert window["tokens"].seconds_until_full > 0
    assert quota.snapshot(0.0, "none") == ()


def test_the_default_enforcement_is_todays_bucket_on_the_top_level_window() -> None:
    quota = Quota(Limits(rpm=600), None, (), 2.0, now=0.0)
    limiter = quota.enforced["requests"]
    assert isinstance(limiter, TokenBucket)
    assert limiter.capacity == 20


arrivals = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=0.5), st.integers(min_value=1, max_value=1500)),
    min_size=1,
    max_size=150,
)
limits = st.integers(min_value=60, max_value=60_000)
windows = st.sampled_from([0.1, 0.5, 1.0, 2.0, 10.0])


@pytest.mark.slow  # property: hundreds of arrival sequences
@settings(max_examples=300, deadline=None)
@given(arrivals=arrivals, limit=limits, window=windows)
def test_a_sliding_window_never_admits_more_than_its_allowance_in_any_window(
    arrivals: list[tuple[float, int]], limit: int, window: float
) -> None:
    """Any half-open interval of length W holds at most max(C, one request's cost)."""
    admitted = admit_greedily(SlidingWindow(limit, window, now=0.0), arrivals)
    capacity = limit * window / 60
    for i, (start, _) in enumerate(admitted):
        inside = [c for t, c in admitted[i:] if t < start + window - 1e-6]
        assert sum(inside) <= max(capacity, *inside) + 1e-6


@pytest.mark.slow  # property: hundreds of arrival sequences
@settings(max_examples=300, deadline=None)
@given(arrivals=arrivals, limit=limits, window=windows)
def test_a_fixed_window_never_admits_more_than_its_allowance_in_one_window(
    arrivals: list[tuple[float, int]], limit: int, window: float
) -> None:
    admitted = admit_greedily(FixedWindow(limit, window, now=0.0), arrivals)
    capacity = limit * window / 60
    per_window: dict[int, list[int]] = {}
    for t, c in admitted:
        per_window.setdefault(math.floor(t / window + 1e-9), []).append(c)
    for costs in per_window.values():
        assert sum(costs) <= capacity + 1e-6 or len(costs) == 1


@pytest.mark.slow  # property: hundreds of arrival sequences
@settings(max_examples=200, deadline=None)
@given(
    arrivals=arrivals,
    limit=limits,
    window=windows,
    kind=st.sampled_from(["token_bucket", "sliding_window", "fixed_window"]),
)
def test_no_kind_passes_the_per_minute_rate_over_time(
    arrivals: list[tuple[float, int]], limit: int, window: float, kind: str
) -> None:
    """Over any [s, e]: admitted ≤ C (fixed: 2C) + limit/60 × (e − s) + the largest single cost."""
    limiter = make_limiter(Enforcement(kind, window), limit, now=0.0)  # type: ignore[arg-type]
    admitted = admit_greedily(limiter, arrivals)
    capacity, rate = limit * window / 60, limit / 60
    slack = 2 * capacity if kind == "fixed_window" else capacity
    biggest = max((c for _, c in admitted), default=0)
    for i, (start, _) in enumerate(admitted):
        total = 0
        for end, cost in admitted[i:]:
            total += cost
            assert total <= slack + rate * (end - start) + biggest + 1e-6


@settings(max_examples=200, deadline=None)
@given(
    arrivals=arrivals,
    limit=limits,
    window=windows,
    kind=st.sampled_from(["token_bucket", "sliding_window", "fixed_window"]),
)
def test_the_wait_a_limiter_names_is_exactly_when_it_admits(
    arrivals: list[tuple[float, int]], limit: int, window: float, kind: str
) -> None:
    """Coming back after `wait_time` seconds is admitted; a little earlier is not."""
    limiter = make_limiter(Enforcement(kind, window), limit, now=0.0)  # type: ignore[arg-type]
    now = 0.0
    for gap, cost in arrivals:
        now += gap
        if limiter.never_fits(cost):
            continue
        wait = limiter.wait_time(cost, now)
        if wait > 1e-3:
            assert limiter.wait_time(cost, now + wait * 0.99) > 0
        now += wait
        assert limiter.wait_time(cost, now) == 0
        limiter.charge(cost, now)
