"""The quota store conformance suite: every QuotaStore (memory, sqlite, redis) keeps the same
shared buckets — the providers' admission rule, refunds, charges, pauses and drains — and every
handle on one store sees one bucket.

Waits are checked within a tolerance below the exact figure: on Redis the server's clock moves on
between two calls — a few milliseconds, or more on a loaded machine, so the tolerance is at least
the wall time the test has taken so far (the most the server's clock can have moved), times
`drift`: when a bucket refilled at a higher rate than the one its take is paced at (a pace cut from
10/s to 1/s), each second the clock moved shortens the wait by the ratio of the two (10 s).
"""

from __future__ import annotations

import math
import time

import pytest

from batchgate.quota.store.protocol import Pace, QuotaStore, Settle

from .conftest import Backend

TOL = 0.05  # seconds of the store's clock that may pass between two calls of one test
_started = [0.0]  # when the running test started (wall clock, monotonic)
NONE = Settle()
REQ = {"requests": Pace(10.0, 0.0, 0.0)}  # 10 requests/s, no burst: evenly spaced


def near(wait: float, expected: float, drift: float = 1.0) -> bool:
    tolerance = max(TOL, time.monotonic() - _started[0]) * drift
    return expected - tolerance < wait <= expected + 1e-9


@pytest.fixture(autouse=True)
def _test_start() -> None:
    _started[0] = time.monotonic()


async def take(
    store: QuotaStore, amounts: dict[str, float], paces: dict[str, Pace] = REQ, quota: str = "q"
) -> float:
    return await store.apply(quota, paces, amounts, Settle())


async def test_a_new_quota_admits_at_once_then_paces_at_its_rate(backend: Backend) -> None:
    s = backend.store
    assert await take(s, {"requests": 1}) == 0.0
    assert near(await take(s, {"requests": 1}), 0.1)
    await backend.advance(0.12)
    assert await take(s, {"requests": 1}) == 0.0


async def test_a_refused_take_takes_nothing(backend: Backend) -> None:
    s = backend.store
    assert await take(s, {"requests": 1}) == 0.0
    first = await take(s, {"requests": 1})
    second = await take(s, {"requests": 1})
    assert near(first, 0.1)
    assert near(second, 0.1)
    assert second <= first


async def test_a_burst_is_bounded_by_the_capacity(backend: Backend) -> None:
    paces = {"requests": Pace(1.0, 3.0, 3.0)}
    s = backend.store
    for _ in range(3):
        assert await take(s, {"requests": 1}, paces) == 0.0
    assert near(await take(s, {"requests": 1}, paces), 1.0)


async def test_a_request_bigger_than_the_bucket_waits_for_a_full_one_then_leaves_a_debt(
    backend: Backend,
) -> None:
    paces = {"tokens": Pace(1.0, 3.0, 3.0)}
    s = backend.store
    assert await take(s, {"tokens": 5}, paces) == 0.0  # full bucket: admitted, level -2
    assert near(await take(s, {"tokens": 5}, paces), 5.0)  # back to a full 3


async def test_every_dimension_must_admit(backend: Backend) -> None:
    paces = {"requests": Pace(10.0, 0.0, 0.0), "tokens": Pace(100.0, 0.0, 0.0)}
    s = backend.store
    assert await take(s, {"requests": 1, "tokens": 50}, paces) == 0.0
    assert near(await take(s, {"requests": 1, "tokens": 1}, paces), 0.5)


async def test_give_back_returns_units_but_never_past_the_capacity(backend: Backend) -> None:
    paces = {"requests": Pace(1.0, 3.0, 3.0)}
    s = backend.store
    assert await take(s, {"requests": 3}, paces) == 0.0
    assert await s.apply("q", paces, None, Settle(deltas={"requests": -5.0})) == 0.0
    assert await take(s, {"requests": 3}, paces) == 0.0  # all three came back ...
    assert near(await take(s, {"requests": 1}, paces), 1.0)  # ... and not five


async def test_a_charge_takes_more_after_the_fact(backend: Backend) -> None:
    s = backend.store
    assert await take(s, {"requests": 1}) == 0.0
    await s.apply("q", REQ, None, Settle(deltas={"requests": 2.0}))
    assert near(await take(s, {"requests": 1}), 0.3)


async def test_a_pause_holds_everyone_and_a_shorter_one_never_shortens_it(backend: Backend) -> None:
    s = backend.store
    await s.apply("q", REQ, None, Settle(pause=2.0))
    assert near(await take(s, {"requests": 1}), 2.0)
    await s.apply("q", REQ, None, Settle(pause=0.5))
    assert near(await take(s, {"requests": 1}), 2.0)


async def test_a_drain_empties_every_bucket(backend: Backend) -> None:
    paces = {"requests": Pace(1.0, 5.0, 5.0)}
    s = backend.store
    assert await take(s, {"requests": 1}, paces) == 0.0
    await s.apply("q", paces, None, Settle(drain=True))
    assert near(await take(s, {"requests": 1}, paces), 1.0)


async def test_a_new_pace_applies_from_now(backend: Backend) -> None:
    s = backend.store
    assert await take(s, {"requests": 1}) == 0.0
    # the debt refilled at 10/s until this take: the wait at 1/s moves 10x the clock
    assert near(await take(s, {"requests": 1}, {"requests": Pace(1.0, 0.0, 0.0)}), 1.0, drift=10.0)


async def test_a_zero_rate_never_refills(backend: Backend) -> None:
    paces = {"requests": Pace(0.0, 0.0, 0.0)}
    s = backend.store
    assert await take(s, {"requests": 1}, paces) == 0.0
    assert math.isinf(await take(s, {"requests": 1}, paces))


async def test_quotas_are_independent(backend: Backend) -> None:
    s = backend.store
    assert await take(s, {"requests": 1}, quota="a") == 0.0
    assert await take(s, {"requests": 1}, quota="b") == 0.0
    assert near(await take(s, {"requests": 1}, quota="a"), 0.1)


async def test_two_handles_share_one_bucket(backend: Backend) -> None:
    other = backend.another()
    backend.opened.append(other)
    assert await take(backend.store, {"requests": 1}) == 0.0
    assert near(await take(other, {"requests": 1}), 0.1)
    await other.apply("q", REQ, None, Settle(pause=1.0))
    assert near(await take(backend.store, {"requests": 1}), 1.0)


async def test_a_lower_pace_slows_everyone_until_nobody_has_asked_for_it_for_its_hold(
    backend: Backend,
) -> None:
    s = backend.store
    # the hold outlasts the gap between two calls on a loaded machine (on Redis it is real time)
    cut = {"requests": Pace(1.0, 0.0, 0.0, hold=0.5)}  # a process whose AIMD cut its rate
    full = {"requests": Pace(10.0, 0.0, 0.0, hold=0.5)}
    assert await take(s, {"requests": 1}, full) == 0.0
    assert near(await take(s, {"requests": 1}, cut), 1.0, drift=10.0)  # the cut applies at once ...
    assert near(await take(s, {"requests": 1}, full), 1.0, drift=10.0)  # ... a higher pace cannot undo it
    await backend.advance(0.55)  # past the cut's hold: the higher pace is adopted again
    assert near(await take(s, {"requests": 1}, full), 0.045)  # 0.45 owed at 10/s, not at 1/s
