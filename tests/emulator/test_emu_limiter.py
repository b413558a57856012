"""The quota's token buckets: admission rule, debt, never-fits, all-or-nothing, headers, changes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.emulator.config import LimitChange, Limits
from batchgate.emulator.limiter import Quota, RequestCost, TokenBucket


def test_bucket_starts_full_and_admits_a_window_allowance() -> None:
    bucket = TokenBucket(600, 1.0, now=0.0)  # 10 per one-second window, refilling 10/s
    admitted = 0
    for _ in range(20):
        if bucket.wait_time(1, 0.0) == 0:
            bucket.charge(1, 0.0)
            admitted += 1
    assert admitted == 10


def test_twenty_requests_spread_over_one_second_against_600_rpm_reject_about_half() -> None:
    bucket = TokenBucket(600, 1.0, now=0.0)
    # Start with an empty bucket, as after a burst, then send 20 evenly over one second.
    bucket.charge(10, 0.0)
    admitted = 0
    for i in range(20):
        now = i / 20
        if bucket.wait_time(1, now) == 0:
            bucket.charge(1, now)
            admitted += 1
    assert 8 <= admitted <= 11


def test_a_request_bigger_than_a_window_waits_for_a_full_bucket_then_goes_into_debt() -> None:
    bucket = TokenBucket(6000, 1.0, now=0.0)  # capacity 100, refill 100/s
    bucket.charge(50, 0.0)
    assert bucket.wait_time(500, 0.0) == pytest.approx(0.5)  # needs the bucket full again
    assert bucket.wait_time(500, 0.5) == 0
    bucket.charge(500, 0.5)
    assert bucket.level == pytest.approx(-400)
    assert bucket.wait_time(1, 0.5) == pytest.approx(4.01)  # the debt is repaid by refill first


def test_more_than_the_whole_minute_never_fits() -> None:
    bucket = TokenBucket(1000, 1.0, now=0.0)
    assert not bucket.never_fits(1000)
    assert bucket.never_fits(1001)
    assert math.isinf(bucket.wait_time(1001, 1e9))


def test_quota_charges_all_dimensions_or_none() -> None:
    quota = Quota(Limits(rpm=600, tpm=6000), None, (), 1.0, now=0.0)  # windows: 10 requests, 100 tokens
    wait, binding = quota.try_admit(RequestCost(tokens=90, input_tokens=40, output_tokens=50), 0.0)
    assert (wait, binding) == (0.0, None)
    wait, binding = quota.try_admit(RequestCost(tokens=90, input_tokens=40, output_tokens=50), 0.0)
    assert binding == "tokens"
    assert wait == pytest.approx(0.8)  # level 10 -> 90 at 100 tokens/s
    requests = quota.enforced["requests"]
    assert isinstance(requests, TokenBucket)
    assert requests.level == pytest.approx(9)  # the refused request cost nothing


def test_quota_never_fits_names_the_dimension() -> None:
    quota = Quota(Limits(rpm=60, itpm=1000, otpm=500), None, (), 1.0, now=0.0)
    assert quota.never_fits(RequestCost(tokens=700, input_tokens=100, output_tokens=600)) == "output_tokens"
    assert quota.never_fits(RequestCost(tokens=700, input_tokens=100, output_tokens=400)) is None


def test_headers_report_declared_limits_while_enforced_ones_bind() -> None:
    quota = Quota(Limits(rpm=600), Limits(rpm=60), (), 1.0, now=0.0)
    cost = RequestCost(tokens=0, input_tokens=0, output_tokens=0)
    assert quota.try_admit(cost, 0.0)[1] is None
    assert quota.try_admit(cost, 0.0)[1] == "requests"  # the enforced window holds one request
    (state,) = quota.snapshot(0.0)
    assert state.limit == 600
    assert state.remaining == 540  # the declared bucket was charged one of its ten


def test_scheduled_limit_change_applies_after_its_time_and_restarts_on_reset() -> None:
    quota = Quota(Limits(rpm=600), None, (LimitChange(30.0, Limits(rpm=60)),), 1.0, now=100.0)
    quota.advance(129.0)
    assert quota.enforced["requests"].limit == 600
    quota.advance(130.0)
    assert quota.enforced["requests"].limit == 60
    assert quota.snapshot(130.0)[0].limit == 60  # honest headers follow the change
    quota.reset(200.0)
    assert quota.enforced["requests"].limit == 600


arrivals = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=0.5), st.integers(min_value=1, max_value=1500)),
    min_size=1,
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(
    arrivals=arrivals,
    limit=st.integers(min_value=60, max_value=60_000),
    window=st.sampled_from([0.1, 0.5, 1.0, 2.0, 10.0]),
)
def test_admitted_cost_never_exceeds_the_window_bound(
    arrivals: list[tuple[float, int]], limit: int, window: float
) -> None:
    """Over any [s, e]: admitted costs <= C + limit/60 × (e − s) + the largest single cost."""
    bucket = TokenBucket(limit, window, now=0.0)
    now = 0.0
    admitted: list[tuple[float, int]] = []
    for gap, cost in arrivals:
        now += gap
        if bucket.never_fits(cost):
            continue
        if bucket.wait_time(cost, now) == 0:
            bucket.charge(cost, now)
            admitted.append((now, cost))
    capacity, rate = limit * window / 60, limit / 60
    biggest = max((c for _, c in admitted), default=0)
    for i, (start, _) in enumerate(admitted):
        total = 0
        for end, cost in admitted[i:]:
            total += cost
            assert total <= capacity + rate * (end - start) + biggest + 1e-6


@settings(max_examples=200, deadline=None)
@given(arrivals=arrivals, rpm=st.integers(min_value=60, max_value=6000), tpm=st.integers(1500, 100_000))
def test_quota_dimensions_each_respect_the_bound(
    arrivals: list[tuple[float, int]], rpm: int, tpm: int
) -> None:
    quota = Quota(Limits(rpm=rpm, tpm=tpm), None, (), 1.0, now=0.0)
    now = 0.0
    admitted: list[tuple[float, int]] = []
    for gap, tokens in arrivals:
        now += gap
        cost = RequestCost(tokens=tokens, input_tokens=tokens, output_tokens=0)
        if quota.never_fits(cost) is None and quota.try_admit(cost, now)[1] is None:
            admitted.append((now, tokens))
    for limit, per_request in ((rpm, True), (tpm, False)):
        capacity, rate = limit / 60, limit / 60
        sizes = [(t, 1 if per_request else tokens) for t, tokens in admitted]
        biggest = max((size for _, size in sizes), default=0)
        for i, (start, _) in enumerate(sizes):
            total = 0
            for end, size in sizes[i:]:
                total += size
                assert total <= capacity + rate * (end - start) + biggest + 1e-6
