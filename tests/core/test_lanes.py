"""Lanes, the waiting line under the quota gate, the shared quota's turns, the in-flight cap and
the fair slots: urgent first, FIFO within a lane, done waiters dropped from the front, and a
waiter cancelled in the instant it was handed its turn told to pass the turn on."""

from __future__ import annotations

import asyncio

import pytest

from batchgate.lanes import Held, Lanes


def futures(n: int) -> list[asyncio.Future[None]]:
    loop = asyncio.get_running_loop()
    return [loop.create_future() for _ in range(n)]


async def test_urgent_waiters_go_first_and_each_lane_is_first_in_first_out() -> None:
    o1, u1, o2, u2 = futures(4)
    lanes: Lanes[asyncio.Future[None]] = Lanes()
    for fut, urgent in ((o1, False), (u1, True), (o2, False), (u2, True)):
        lanes.append(fut, urgent=urgent)
    assert list(lanes) == [u1, u2, o1, o2]
    assert lanes.head() is u1
    assert [lanes.popleft() for _ in range(5)] == [u1, u2, o1, o2, None]
    assert not lanes
    assert len(lanes) == 0


async def test_done_waiters_count_until_the_front_of_their_lane_drops_them() -> None:
    u1, u2, o1, o2 = futures(4)
    lanes: Lanes[asyncio.Future[None]] = Lanes()
    lanes.append(u1, urgent=True)
    lanes.append(u2, urgent=True)
    lanes.append(o1, urgent=False)
    lanes.append(o2, urgent=False)
    u1.cancel()
    u2.cancel()
    o2.cancel()  # behind a live waiter: stays until it reaches the front
    assert (len(lanes), lanes.pending()) == (4, 1)
    assert lanes.head() is o1
    assert list(lanes) == [o1, o2]
    assert lanes.popleft() is o1
    assert lanes.head() is None
    assert (len(lanes), bool(lanes)) == (0, False)
    assert "urgent=0, ordinary=0" in repr(lanes)


async def test_a_newcomer_is_behind_the_urgent_lane_and_an_ordinary_one_behind_both() -> None:
    waiting, gone = futures(2)
    lanes: Lanes[asyncio.Future[None]] = Lanes()
    assert not lanes.ahead_of(True)
    assert not lanes.ahead_of(False)
    lanes.append(waiting, urgent=False)
    assert not lanes.ahead_of(True), "an urgent newcomer passes ordinary waiters"
    assert lanes.ahead_of(False)
    lanes.popleft()
    lanes.append(gone, urgent=True)
    gone.cancel()  # done, but its task has not left yet: it still counts
    assert lanes.ahead_of(True)
    assert lanes.ahead_of(False)


async def test_remove_takes_a_waiter_from_whichever_lane_holds_it() -> None:
    urgent, ordinary, stranger = futures(3)
    lanes: Lanes[asyncio.Future[None]] = Lanes()
    lanes.append(urgent, urgent=True)
    lanes.append(ordinary, urgent=False)
    assert lanes.remove(ordinary)
    assert not lanes.remove(stranger)
    assert lanes.remove(urgent)
    assert not lanes.remove(urgent)
    assert len(lanes) == 0


async def test_leave_takes_a_cancelled_waiter_out_of_its_lane() -> None:
    first, second = futures(2)
    lanes: Lanes[asyncio.Future[None]] = Lanes()
    lanes.append(first, urgent=False)
    lanes.append(second, urgent=False)
    second.cancel()
    assert lanes.leave(second) is False
    assert list(lanes) == [first]
    first.cancel()
    assert lanes.popleft() is None  # a wake dropped it before its task resumed
    assert lanes.leave(first) is False
    assert len(lanes) == 0


async def test_leave_does_not_pass_on_a_turn_a_waiter_was_failed_instead_of_handed() -> None:
    (failed,) = futures(1)
    lanes: Lanes[asyncio.Future[None]] = Lanes()
    lanes.append(failed, urgent=True)
    lanes.remove(failed)
    failed.set_exception(ValueError("no longer fits"))
    assert lanes.leave(failed) is False
    with pytest.raises(ValueError, match="no longer fits"):
        failed.result()


async def test_a_waiter_handed_its_turn_as_its_caller_is_cancelled_is_told_to_pass_it_on() -> None:
    lanes: Lanes[asyncio.Future[None]] = Lanes()
    passed_on: list[asyncio.Future[None]] = []

    async def wait(fut: asyncio.Future[None]) -> None:
        lanes.append(fut, urgent=False)
        try:
            await fut
        except asyncio.CancelledError:
            if lanes.leave(fut):
                passed_on.append(fut)
            raise

    handed, nxt = futures(2)
    tasks = [asyncio.ensure_future(wait(handed)), asyncio.ensure_future(wait(nxt))]
    await asyncio.sleep(0)
    turn = lanes.popleft()
    assert turn is handed
    turn.set_result(None)
    tasks[0].cancel()  # the same instant: the task resumes cancelled, its turn already given
    with pytest.raises(asyncio.CancelledError):
        await tasks[0]
    assert passed_on == [handed]
    assert list(lanes) == [nxt], "the next waiter is still in line for the turn passed on"
    tasks[1].cancel()
    with pytest.raises(asyncio.CancelledError):
        await tasks[1]
    assert passed_on == [handed]
    assert len(lanes) == 0


async def test_clear_empties_both_lanes_head_first() -> None:
    o1, u1 = futures(2)
    lanes: Lanes[asyncio.Future[None]] = Lanes()
    lanes.append(o1, urgent=False)
    lanes.append(u1, urgent=True)
    assert lanes.clear() == [u1, o1]
    assert (len(lanes), lanes.head()) == (0, None)


async def test_a_record_answering_for_its_future_waits_like_a_future() -> None:
    a, b = (Held(name, fut) for name, fut in zip("ab", futures(2), strict=True))
    lanes: Lanes[Held[str, None]] = Lanes()
    lanes.append(a, urgent=False)
    lanes.append(b, urgent=False)
    a.future.cancel()
    assert [r.item for r in lanes] == ["a", "b"]
    assert lanes.popleft() is b
    b.future.set_result(None)
    assert lanes.leave(b) is True
