"""`JobStore.add_done` (the response cache's bulk path), on every job store (memory, SQLite,
Postgres): finished tasks go in with their outcomes in one call, are never claimed, count and
stream like completed ones, and a task already present is left untouched."""

from __future__ import annotations

import pytest

from batchgate.errors import JobError
from batchgate.jobs.store.protocol import JobStore, TaskState

from .factories import job, outcome, spec, specs


async def test_add_done_stores_finished_tasks_that_are_never_claimed(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(1))  # seq 0: pending
    done = [(spec(1), outcome(1, cost_usd=0.0)), (spec(2), outcome(2, cost_usd=0.0))]
    assert await store.add_done("job1", done) == 2
    counts = await store.counts("job1")
    assert (counts[TaskState.PENDING], counts[TaskState.SUCCEEDED]) == (1, 2)
    assert [t.seq for t in await store.claim_tasks("job1", 10)] == [0]
    records = [r async for r in store.iter_results("job1", ordered=False, with_bodies=True)]
    assert [r.seq for r in records] == [1, 2, 0]  # completed ones by completion order, then the rest
    first = records[0]
    assert first.output_line == outcome(1).output_line
    assert first.body == spec(1).body
    assert first.completed_order is not None
    assert (await store.totals("job1"))["prompt_tokens"] == 20.0


async def test_add_done_leaves_present_tasks_untouched(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(2))
    assert await store.add_done("job1", [(spec(1), outcome(1)), (spec(5), outcome(5))]) == 1
    counts = await store.counts("job1")
    assert (counts[TaskState.PENDING], counts[TaskState.SUCCEEDED]) == (2, 1)
    assert await store.add_done("job1", []) == 0


async def test_add_done_refuses_unfinished_outcomes_and_unknown_jobs(store: JobStore) -> None:
    await store.create_job(job())
    with pytest.raises(ValueError, match="non-terminal"):
        await store.add_done("job1", [(spec(0), outcome(0, TaskState.RUNNING))])
    with pytest.raises(JobError, match="nope"):
        await store.add_done("nope", [(spec(0), outcome(0))])


async def test_add_done_stores_a_chunk_whole_with_its_pending_tasks(store: JobStore) -> None:
    await store.create_job(job())
    chunk = specs(4)
    done = [(chunk[0], outcome(0)), (chunk[2], outcome(2))]
    assert await store.add_done("job1", done, [chunk[1], chunk[3]]) == 4
    counts = await store.counts("job1")
    assert (counts[TaskState.PENDING], counts[TaskState.SUCCEEDED]) == (2, 2)
    assert [t.seq for t in await store.claim_tasks("job1", 10)] == [1, 3]
    assert await store.add_done("job1", done, [chunk[1], chunk[3]]) == 0  # again: nothing new
    with pytest.raises(ValueError, match="non-terminal"):  # checked before anything is written
        await store.add_done("job1", [(spec(7), outcome(7, TaskState.RUNNING))], [spec(8)])
    assert sum((await store.counts("job1")).values()) == 4
