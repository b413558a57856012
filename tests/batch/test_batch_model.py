"""Unit tests of the common batch model: the splitter, the poll policy and loop, the handle."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchgate.clock import FakeClock
from batchgate.errors import ServerError
from batchgate.policy.poll import PollPolicy
from batchgate.providers.batch.common import (
    BatchCounts,
    BatchHandle,
    BatchRequest,
    BatchStatus,
    poll_until_done,
    split_for_batches,
)


def test_split_by_count_keeps_order() -> None:
    batches = split_for_batches(list(range(10)), max_requests=4, max_bytes=10**6)
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_split_by_bytes() -> None:
    items = ["x" * 8] * 5  # each 10 bytes of JSON + a newline = 11
    batches = split_for_batches(items, max_requests=100, max_bytes=33)
    assert [len(b) for b in batches] == [3, 2]


def test_split_default_size_measures_batch_requests() -> None:
    requests = [BatchRequest(f"r{i}", {"model": "m", "messages": []}) for i in range(3)]
    one = len(orjson.dumps(requests[0])) + 1
    assert split_for_batches(requests, 10, 2 * one) == [requests[:2], requests[2:]]


def test_split_refuses_an_item_larger_than_a_batch() -> None:
    with pytest.raises(ValueError, match="item 1 is 12 bytes"):
        split_for_batches(["a", "b" * 9], max_requests=5, max_bytes=11)


def test_split_empty_and_bad_limits() -> None:
    assert split_for_batches([], 3, 100) == []
    with pytest.raises(ValueError, match="positive"):
        split_for_batches([1], 0, 100)


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=50), max_size=60),
    max_requests=st.integers(min_value=1, max_value=8),
    max_bytes=st.integers(min_value=50, max_value=200),
)
def test_split_properties(sizes: list[int], max_requests: int, max_bytes: int) -> None:
    items = list(enumerate(sizes))
    batches = split_for_batches(items, max_requests, max_bytes, size=lambda item: item[1])
    assert [item for batch in batches for item in batch] == items  # nothing lost, order kept
    for i, batch in enumerate(batches):
        assert 1 <= len(batch) <= max_requests
        assert sum(s for _, s in batch) <= max_bytes
        if i + 1 < len(batches):  # greedy: the next item would not have fitted
            nxt = batches[i + 1][0][1]
            assert len(batch) == max_requests or sum(s for _, s in batch) + nxt > max_bytes


def test_poll_policy_grows_and_caps() -> None:
    policy = PollPolicy(initial=2.0, factor=1.5, maximum=5.0)
    assert [policy.interval(n) for n in range(5)] == [2.0, 3.0, 4.5, 5.0, 5.0]
    assert policy.interval(10_000) == 5.0


@pytest.mark.parametrize(
    "kwargs", [{"initial": 0.0}, {"initial": 5.0, "maximum": 1.0}, {"factor": 0.5}, {"max_failures": -1}]
)
def test_poll_policy_refuses_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 -- the message varies by field
        PollPolicy(**kwargs)


def _status(state: str) -> BatchStatus:
    return BatchStatus(state, BatchCounts(total=1), {"status": state})  # type: ignore[arg-type]


async def _drive(clock: FakeClock, task: asyncio.Task[BatchStatus]) -> BatchStatus:
    """Advance the fake clock by each sleep the poll asks for, until the poll returns."""
    seen = 0
    while not task.done():
        await asyncio.sleep(0)
        if len(clock.sleeps) > seen:
            seen = len(clock.sleeps)
            clock.advance(clock.sleeps[-1])
    return task.result()


async def test_poll_sleeps_growing_intervals_until_done() -> None:
    clock = FakeClock()
    states = iter(["in_progress"] * 5 + ["completed"])
    seen: list[str] = []

    async def fetch() -> BatchStatus:
        return _status(next(states))

    task = asyncio.create_task(
        poll_until_done(fetch, clock, PollPolicy(1.0, 2.0, 5.0), on_status=lambda s: seen.append(s.state))
    )
    final = await _drive(clock, task)
    assert final.state == "completed"
    assert clock.sleeps == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert seen == ["in_progress"] * 5 + ["completed"]


async def test_poll_tolerates_transient_errors_then_gives_up() -> None:
    clock = FakeClock()
    answers: list[Any] = [ServerError("boom"), ServerError("boom"), _status("expired")]

    async def fetch() -> BatchStatus:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    task = asyncio.create_task(poll_until_done(fetch, clock, PollPolicy(1.0, 2.0, 8.0, max_failures=2)))
    assert (await _drive(clock, task)).state == "expired"

    clock2 = FakeClock()

    async def always_failing() -> BatchStatus:
        raise ServerError("still down")

    failing = asyncio.create_task(
        poll_until_done(always_failing, clock2, PollPolicy(1.0, 2.0, 8.0, max_failures=2))
    )
    with pytest.raises(ServerError):
        await _drive(clock2, failing)
    assert len(clock2.sleeps) == 2


def test_handle_round_trips_through_json() -> None:
    handle = BatchHandle("alpha", "batch_123", "openai")
    assert BatchHandle.from_dict(orjson.loads(orjson.dumps(handle.to_dict()))) == handle


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"provider": "a", "batch_id": "b"}, "kind"),
        ({"provider": "", "batch_id": "b", "kind": "openai"}, "provider"),
        ({"provider": "a", "batch_id": 7, "kind": "openai"}, "batch_id"),
        ({"provider": "a", "batch_id": "b", "kind": "cohere"}, "kind"),
    ],
)
def test_handle_from_dict_names_the_bad_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=f"'{key}'"):
        BatchHandle.from_dict(data)
