"""The chunk-lease contract (claim, renew, fenced commit, release, expiry), run on every store.

Time moves only through the test's `ManualWall`, which every store (Postgres included, as its
lease clock) reads, so expiry is exact and nothing sleeps.
"""

from __future__ import annotations

import asyncio

import pytest

from batchgate.errors import JobError, LeaseLostError
from batchgate.jobs.store.protocol import JobStore, TaskRecord, TaskState

from .factories import ManualWall, job, outcome, specs


async def _records(store: JobStore) -> dict[int, TaskRecord]:
    return {r.seq: r async for r in store.iter_results("job1", ordered=True)}


async def _setup(store: JobStore, n: int) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(n))


async def test_claim_chunk_takes_pending_in_seq_order_under_growing_tokens(store: JobStore) -> None:
    await _setup(store, 10)
    await store.claim_tasks("job1", 2)  # 0, 1 running outside any lease
    first = await store.claim_chunk("job1", 3, owner="w1", lease_seconds=30)
    second = await store.claim_chunk("job1", 100, owner="w2", lease_seconds=30)
    assert first is not None
    assert second is not None
    assert [t.seq for t in first.tasks] == [2, 3, 4]
    assert [t.seq for t in second.tasks] == [5, 6, 7, 8, 9]
    assert first.tasks[0] == specs(3)[2]
    assert (first.job_id, first.owner, first.expires_at) == ("job1", "w1", 1030.0)
    assert second.token > first.token
    assert await store.claim_chunk("job1", 5, owner="w3", lease_seconds=30) is None
    assert await store.claim_chunk("job1", 0, owner="w3", lease_seconds=30) is None
    assert (await store.counts("job1"))[TaskState.RUNNING] == 10
    with pytest.raises(ValueError, match="lease_seconds"):
        await store.claim_chunk("job1", 1, owner="w3", lease_seconds=0)
    with pytest.raises(JobError, match="nope"):
        await store.claim_chunk("nope", 1, owner="w3", lease_seconds=30)


async def test_concurrent_chunk_claims_never_overlap(store: JobStore) -> None:
    await _setup(store, 300)
    chunks = await asyncio.gather(
        *(store.claim_chunk("job1", 11, owner=f"w{i}", lease_seconds=30) for i in range(40))
    )
    seqs = [t.seq for c in chunks if c is not None for t in c.tasks]
    assert sorted(seqs) == list(range(300))
    tokens = [c.token for c in chunks if c is not None]
    assert len(set(tokens)) == len(tokens)


async def test_commit_chunk_writes_outcomes_under_a_held_lease(store: JobStore) -> None:
    await _setup(store, 4)
    chunk = await store.claim_chunk("job1", 3, owner="w1", lease_seconds=30)
    assert chunk is not None
    await store.commit_chunk("job1", chunk.token, [outcome(1), outcome(0, TaskState.FAILED)])
    await store.commit_chunk("job1", chunk.token, [])
    records = await _records(store)
    assert [records[s].state for s in range(4)] == [
        TaskState.FAILED,
        TaskState.SUCCEEDED,
        TaskState.RUNNING,
        TaskState.PENDING,
    ]
    assert (records[1].completed_order or 0) < (records[0].completed_order or 0)
    assert await store.release_chunk("job1", chunk.token) == 1  # only seq 2 was unfinished
    assert (await store.counts("job1"))[TaskState.PENDING] == 2


async def test_a_stale_workers_commit_is_refused(store: JobStore, wall: ManualWall) -> None:
    """Worker A's lease expires; B takes the same tasks; A's late commit must write nothing."""
    await _setup(store, 3)
    stale = await store.claim_chunk("job1", 3, owner="A", lease_seconds=10)
    assert stale is not None
    wall.advance(10)  # expiry is inclusive: at expires_at the lease is gone
    fresh = await store.claim_chunk("job1", 3, owner="B", lease_seconds=10)
    assert fresh is not None
    assert [t.seq for t in fresh.tasks] == [0, 1, 2]
    assert fresh.token > stale.token
    with pytest.raises(LeaseLostError, match="nothing written"):
        await store.commit_chunk("job1", stale.token, [outcome(0, attempts=7)])
    with pytest.raises(LeaseLostError):
        await store.renew_lease("job1", stale.token, 10)
    assert (await store.counts("job1"))[TaskState.SUCCEEDED] == 0
    await store.commit_chunk("job1", fresh.token, [outcome(0, attempts=2)])
    assert (await _records(store))[0].attempts == 2


async def test_an_expired_unreaped_lease_cannot_commit_or_renew(store: JobStore, wall: ManualWall) -> None:
    await _setup(store, 2)
    chunk = await store.claim_chunk("job1", 2, owner="A", lease_seconds=5)
    assert chunk is not None
    wall.advance(6)
    with pytest.raises(LeaseLostError):
        await store.commit_chunk("job1", chunk.token, [outcome(0)])
    with pytest.raises(LeaseLostError):
        await store.renew_lease("job1", chunk.token, 5)
    assert (await store.counts("job1"))[TaskState.RUNNING] == 2  # not reaped yet
    assert await store.requeue_expired("job1") == 2
    assert await store.requeue_expired("job1") == 0
    assert [t.seq for t in await store.claim_tasks("job1", 5)] == [0, 1]


async def test_renewing_keeps_a_lease_alive(store: JobStore, wall: ManualWall) -> None:
    await _setup(store, 2)
    chunk = await store.claim_chunk("job1", 2, owner="A", lease_seconds=10)
    assert chunk is not None
    wall.advance(8)
    assert await store.renew_lease("job1", chunk.token, 10) == pytest.approx(1018.0)
    wall.advance(8)  # past the first expiry, within the renewed one
    assert await store.requeue_expired("job1") == 0
    assert await store.claim_chunk("job1", 2, owner="B", lease_seconds=10) is None
    await store.commit_chunk("job1", chunk.token, [outcome(0), outcome(1)])
    assert (await store.counts("job1"))[TaskState.SUCCEEDED] == 2
    with pytest.raises(ValueError, match="lease_seconds"):
        await store.renew_lease("job1", chunk.token, -1)


async def test_a_commit_naming_a_task_outside_the_lease_writes_nothing(store: JobStore) -> None:
    await _setup(store, 4)
    mine = await store.claim_chunk("job1", 2, owner="A", lease_seconds=30)
    theirs = await store.claim_chunk("job1", 2, owner="B", lease_seconds=30)
    assert mine is not None
    assert theirs is not None
    with pytest.raises(LeaseLostError, match="nothing written"):
        await store.commit_chunk("job1", mine.token, [outcome(0), outcome(2)])  # 2 is B's
    with pytest.raises(LeaseLostError):
        await store.commit_chunk("job1", mine.token, [outcome(0), outcome(99)])  # no such task
    assert (await store.counts("job1"))[TaskState.SUCCEEDED] == 0
    with pytest.raises(ValueError, match="non-terminal"):
        await store.commit_chunk("job1", mine.token, [outcome(0, TaskState.RUNNING)])


async def test_requeue_running_fences_out_the_leaseholder(store: JobStore) -> None:
    """A crash-resume (`requeue_running`) takes tasks back: a worker still holding their lease
    must not write over whoever runs them next."""
    await _setup(store, 2)
    chunk = await store.claim_chunk("job1", 2, owner="A", lease_seconds=30)
    assert chunk is not None
    assert await store.requeue_running("job1") == 2
    await store.claim_tasks("job1", 2)
    with pytest.raises(LeaseLostError):
        await store.commit_chunk("job1", chunk.token, [outcome(0)])
    assert await store.release_chunk("job1", chunk.token) == 0  # its tasks are no longer its own
    assert (await store.counts("job1"))[TaskState.RUNNING] == 2


async def test_released_and_expired_leases_go_back_to_the_queue(store: JobStore, wall: ManualWall) -> None:
    await _setup(store, 6)
    a = await store.claim_chunk("job1", 2, owner="A", lease_seconds=5)
    b = await store.claim_chunk("job1", 2, owner="B", lease_seconds=50)
    assert a is not None
    assert b is not None
    assert await store.release_chunk("job1", b.token) == 2
    assert await store.release_chunk("job1", b.token) == 0  # idempotent
    with pytest.raises(LeaseLostError):
        await store.commit_chunk("job1", b.token, [outcome(2)])
    wall.advance(5)
    c = await store.claim_chunk("job1", 10, owner="C", lease_seconds=5)  # reaps A's first
    assert c is not None
    assert [t.seq for t in c.tasks] == [0, 1, 2, 3, 4, 5]
