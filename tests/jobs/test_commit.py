"""GroupCommitter: batches by size, by delay (FakeClock timers), on flush and close; never hides errors."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from batchgate.clock import FakeClock
from batchgate.errors import StoreError
from batchgate.jobs.commit import GroupCommitter
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskOutcome, TaskState

from .factories import job, outcome, specs


class RecordingStore(MemoryJobStore):
    """A memory store that records each complete_tasks call and can be told to fail or to wait."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[int]] = []
        self.called = asyncio.Event()
        self.fail_next = False
        self.gate: asyncio.Event | None = None

    async def complete_tasks(self, job_id: str, outcomes: Sequence[TaskOutcome]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.calls.append([o.seq for o in outcomes])
        self.called.set()
        if self.fail_next:
            self.fail_next = False
            raise StoreError("jobs.db: the disk is full")
        await super().complete_tasks(job_id, outcomes)


async def make(n: int = 50) -> RecordingStore:
    store = RecordingStore()
    await store.create_job(job())
    await store.add_tasks("job1", specs(n))
    return store


async def next_call(store: RecordingStore) -> None:
    await asyncio.wait_for(store.called.wait(), 10)
    store.called.clear()


async def succeeded(store: RecordingStore) -> int:
    return (await store.counts("job1"))[TaskState.SUCCEEDED]


async def test_a_full_batch_is_written_at_once() -> None:
    store, clock = await make(), FakeClock()
    gc = GroupCommitter(store, "job1", clock, max_batch=3, max_delay=1.0)
    for seq in range(3):
        gc.add(outcome(seq))
    await next_call(store)
    assert store.calls == [[0, 1, 2]]
    await gc.flush()
    assert gc.committed == 3
    assert await succeeded(store) == 3


async def test_a_partial_batch_waits_for_the_delay() -> None:
    store, clock = await make(), FakeClock()
    gc = GroupCommitter(store, "job1", clock, max_batch=100, max_delay=0.05)
    gc.add(outcome(0))
    gc.add(outcome(1))
    for _ in range(5):
        await asyncio.sleep(0)
    assert store.calls == []  # nothing written before the deadline
    clock.advance(0.049)
    assert store.calls == []
    clock.advance(0.001)
    await next_call(store)
    assert store.calls == [[0, 1]]
    assert clock.pending_timers() == 0


async def test_the_deadline_counts_from_the_first_waiting_outcome() -> None:
    store, clock = await make(), FakeClock()
    gc = GroupCommitter(store, "job1", clock, max_batch=100, max_delay=0.05)
    gc.add(outcome(0))
    clock.advance(0.03)
    gc.add(outcome(1))
    clock.advance(0.02)
    await next_call(store)
    assert store.calls == [[0, 1]]


async def test_flush_and_close_write_everything() -> None:
    store, clock = await make(), FakeClock()
    gc = GroupCommitter(store, "job1", clock, max_batch=4, max_delay=10.0)
    for seq in range(10):
        gc.add(outcome(seq))
    await gc.flush()
    assert store.calls == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert (gc.committed, gc.pending, gc.transactions) == (10, 0, 3)
    gc.add(outcome(10))
    await gc.close()
    assert store.calls[-1] == [10]
    assert await succeeded(store) == 11
    assert clock.pending_timers() == 0
    with pytest.raises(RuntimeError, match="closed"):
        gc.add(outcome(11))
    await gc.close()


async def test_outcomes_arriving_during_a_write_join_the_next_one() -> None:
    store, clock = await make(), FakeClock()
    store.gate = asyncio.Event()
    gc = GroupCommitter(store, "job1", clock, max_batch=2, max_delay=1.0)
    gc.add(outcome(0))
    gc.add(outcome(1))  # starts a write, held at the gate
    for seq in range(2, 6):
        gc.add(outcome(seq))
    store.gate.set()
    await gc.flush()
    assert store.calls == [[0, 1], [2, 3], [4, 5]]


async def test_a_failed_write_surfaces_on_the_next_add_and_loses_nothing() -> None:
    store, clock = await make(), FakeClock()
    gc = GroupCommitter(store, "job1", clock, max_batch=2, max_delay=1.0)
    store.fail_next = True
    gc.add(outcome(0))
    gc.add(outcome(1))
    await next_call(store)
    await asyncio.sleep(0)
    with pytest.raises(StoreError, match="disk is full"):
        gc.add(outcome(2))
    assert gc.pending == 2  # the failed batch is kept; outcome 2 was refused
    gc.add(outcome(2))
    await gc.flush()
    assert await succeeded(store) == 3
    assert gc.committed == 3


async def test_a_failed_write_surfaces_on_flush_and_close() -> None:
    store, clock = await make(), FakeClock()
    gc = GroupCommitter(store, "job1", clock, max_batch=10, max_delay=1.0)
    gc.add(outcome(0))
    store.fail_next = True
    with pytest.raises(StoreError):
        await gc.flush()
    store.fail_next = True
    with pytest.raises(StoreError):
        await gc.close()
    assert await succeeded(store) == 0


def test_bad_settings_are_refused() -> None:
    store, clock = MemoryJobStore(), FakeClock()
    with pytest.raises(ValueError, match="max_batch"):
        GroupCommitter(store, "job1", clock, max_batch=0)
    with pytest.raises(ValueError, match="max_delay"):
        GroupCommitter(store, "job1", clock, max_delay=-1)
