"""The quota store conformance suite: every QuotaStore (memory, sqlite, redis) keeps the same
shared buckets — the providers' admission rule, refunds, charges, pauses and drains — and the
same window logs — admissions held for their hold, per-entry corrections, restamps — and every
handle on one store sees one bucket and one log.

Waits are exact on a FakeClock (memory, SQLite). On Redis the server's clock moves on between two
calls — a few milliseconds, or more on a loaded machine — so a wait may fall short of the exact
figure by as much as that clock has moved since the store opened (read from the server, never
from the test's own timer), times `drift`: when a bucket refilled at a higher rate than the one
its take is paced at (a pace cut from 10/s to 1/s), each second the clock moved shortens the wait
by the ratio of the two (10 s).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest

from batchgate.quota.store.protocol import Pace, QuotaStore, Restamp, Settle, Take

from .conftest import Backend

EXACT = 1e-9  # floating-point room around an exact figure
_unasked: list[Callable[[], float]] = []  # the running test's store: how far its clock moved alone
NONE = Settle()
REQ = {"requests": Pace(10.0, 0.0, 0.0)}  # 10 requests/s, no burst: evenly spaced


def near(wait: float, expected: float, drift: float = 1.0) -> bool:
    tolerance = _unasked[-1]() * drift + EXACT
    return expected - tolerance <= wait <= expected + EXACT


@pytest.fixture(autouse=True)
def _store_clock(backend: Backend) -> Iterator[None]:
    _unasked.append(backend.unasked)
    yield
    _unasked.pop()


_keys = iter(range(1, 1 << 62))


async def take(
    store: QuotaStore,
    amounts: dict[str, float],
    paces: dict[str, Pace] = REQ,
    quota: str = "q",
    *,
    key: str | None = None,
    hold: float = 1.0,
) -> float:
    return await store.apply(quota, paces, Take(key or f"t{next(_keys)}", amounts, hold), Settle())


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


# -- window logs ---------------------------------------------------------------------------------

# 100 requests/s with a whole second of burst, but a window allowance of 3 per second: the log binds
BURSTY = {"requests": Pace(100.0, 100.0, 100.0, window=3.0)}


async def test_the_window_log_holds_the_allowance_until_its_oldest_entry_leaves(backend: Backend) -> None:
    s = backend.store
    for _ in range(3):
        assert await take(s, {"requests": 1}, BURSTY, hold=0.5) == 0.0
    assert near(await take(s, {"requests": 1}, BURSTY, hold=0.5), 0.5)  # the bucket alone: at once
    await backend.advance(0.52)
    assert await take(s, {"requests": 1}, BURSTY, hold=0.5) == 0.0


async def test_without_a_window_allowance_nothing_is_logged(backend: Backend) -> None:
    s = backend.store
    paces = {"requests": Pace(100.0, 100.0, 100.0)}
    for _ in range(10):
        assert await take(s, {"requests": 1}, paces) == 0.0


async def test_a_big_request_waits_for_the_entries_it_needs_to_leave(backend: Backend) -> None:
    s = backend.store
    paces = {"tokens": Pace(1000.0, 1000.0, 1000.0, window=10.0)}
    assert await take(s, {"tokens": 4}, paces, hold=0.3) == 0.0
    await backend.advance(0.1)
    assert await take(s, {"tokens": 4}, paces, hold=0.3) == 0.0  # 8 of 10 held
    # 5 more needs 3 freed: the first entry's 4, which leaves 0.2 s from now (0.1 later: the second)
    assert near(await take(s, {"tokens": 5}, paces, hold=0.3), 0.2)
    # a request bigger than the allowance waits for an empty log (both entries gone)
    assert near(await take(s, {"tokens": 50}, paces, hold=0.3), 0.3)


async def test_an_entry_delta_corrects_only_that_entry_and_never_below_zero(backend: Backend) -> None:
    s = backend.store
    for key in ("a", "b", "c"):
        assert await take(s, {"requests": 1}, BURSTY, key=key) == 0.0
    await s.apply("q", BURSTY, None, Settle(entries={"b": {"requests": -5.0}}))  # b: refunded
    assert await take(s, {"requests": 1}, BURSTY) == 0.0  # b's place is free ...
    assert near(await take(s, {"requests": 1}, BURSTY), 1.0)  # ... and only one place
    await s.apply("q", BURSTY, None, Settle(entries={"a": {"requests": 2.0}, "gone": {"requests": 9.0}}))
    await s.apply("q", BURSTY, None, Settle(entries={"b": {"requests": 1.0}}))  # b is back at 1
    assert near(await take(s, {"requests": 1}, BURSTY), 1.0)  # an unknown key changed nothing ...
    await backend.advance(1.02)  # ... and every entry left with its hold
    assert await take(s, {"requests": 1}, BURSTY) == 0.0


async def test_a_restamp_counts_an_entry_from_now_or_logs_it_again(backend: Backend) -> None:
    s = backend.store
    assert await take(s, {"requests": 3}, BURSTY, key="late", hold=0.3) == 0.0
    await backend.advance(0.2)
    await s.apply("q", BURSTY, None, Settle(restamps={"late": Restamp(0.3, {"requests": 3})}))
    await backend.advance(0.15)  # past its first hold, within the restamped one
    assert near(await take(s, {"requests": 1}, BURSTY), 0.15)
    await backend.advance(0.17)  # gone now; a restamp of an entry that already left logs it again
    await s.apply("q", BURSTY, None, Settle(restamps={"late": Restamp(0.3, {"requests": 3})}))
    assert near(await take(s, {"requests": 1}, BURSTY), 0.3)


async def test_two_handles_share_one_window_log(backend: Backend) -> None:
    other = backend.another()
    backend.opened.append(other)
    assert await take(backend.store, {"requests": 2}, BURSTY, key="mine") == 0.0
    assert await take(other, {"requests": 1}, BURSTY) == 0.0
    assert near(await take(other, {"requests": 1}, BURSTY), 1.0)
    await other.apply("q", BURSTY, None, Settle(entries={"mine": {"requests": -1.0}}))
    assert await take(backend.store, {"requests": 1}, BURSTY) == 0.0


async def test_a_refused_take_logs_nothing(backend: Backend) -> None:
    s = backend.store
    for _ in range(3):
        assert await take(s, {"requests": 1}, BURSTY, hold=0.3) == 0.0
    for _ in range(5):
        assert await take(s, {"requests": 1}, BURSTY, hold=5.0) > 0.0  # refused: not logged
    await backend.advance(0.32)
    for _ in range(3):
        assert await take(s, {"requests": 1}, BURSTY, hold=0.3) == 0.0
