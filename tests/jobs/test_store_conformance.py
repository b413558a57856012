"""The JobStore contract, run against every implementation (see conftest.STORE_KINDS)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from batchgate.errors import JobError, JobLockedError
from batchgate.jobs.store.options import JobOptions
from batchgate.jobs.store.protocol import JobStore, TaskRecord, TaskState

from .factories import job, outcome, spec, specs


async def collect(store: JobStore, job_id: str, **kwargs: object) -> list[TaskRecord]:
    return [r async for r in store.iter_results(job_id, **kwargs)]  # type: ignore[arg-type]


def test_both_implement_the_protocol(store: JobStore) -> None:
    assert isinstance(store, JobStore)


async def test_create_get_list(store: JobStore) -> None:
    assert await store.get_job("job1") is None
    assert await store.list_jobs() == []
    await store.create_job(job("job2", created_at=200.0))
    await store.create_job(job("job1", created_at=100.0))
    got = await store.get_job("job1")
    assert got == job("job1", created_at=100.0)
    assert [j.job_id for j in await store.list_jobs()] == ["job1", "job2"]


async def test_create_twice_is_refused(store: JobStore) -> None:
    await store.create_job(job())
    with pytest.raises(JobError, match="job1"):
        await store.create_job(job())


async def test_update_job_changes_only_given_fields(store: JobStore) -> None:
    await store.create_job(job())
    await store.update_job("job1", status="stopped", stop_reason="budget")
    got = await store.get_job("job1")
    assert got is not None
    assert (got.status, got.stop_reason, got.options) == ("stopped", "budget", job().options)
    assert got.updated_at != 100.0
    await store.update_job("job1", options=JobOptions(ordered=True), input_sha256="cd" * 32, task_total=7)
    got = await store.get_job("job1")
    assert got is not None
    assert (got.status, got.options, got.input_sha256, got.task_total) == (
        "stopped",
        JobOptions(ordered=True),
        "cd" * 32,
        7,
    )
    assert got.stop_reason == "budget"  # left alone
    await store.update_job("job1", status="completed", stop_reason="")
    got = await store.get_job("job1")
    assert got is not None
    assert (got.status, got.stop_reason) == ("completed", None)  # an empty reason clears it
    with pytest.raises(ValueError, match="status"):
        await store.update_job("job1", status="exploded")


async def test_unknown_job_is_an_error_for_job_scoped_calls(store: JobStore) -> None:
    with pytest.raises(JobError, match="nope"):
        await store.update_job("nope", status="running")
    with pytest.raises(JobError, match="nope"):
        await store.add_tasks("nope", specs(1))
    with pytest.raises(JobError, match="nope"):
        await store.claim_tasks("nope", 1)
    with pytest.raises(JobError, match="nope"):
        await store.counts("nope")
    with pytest.raises(JobError, match="nope"):
        await collect(store, "nope", ordered=True)
    with pytest.raises(JobError, match="nope"):
        await store.put_blob("nope", "k", b"v")
    assert await store.get_blob("nope", "k") is None
    assert await store.get_task_body("nope", 0) is None


async def test_add_is_idempotent_on_seq(store: JobStore) -> None:
    await store.create_job(job())
    assert await store.add_tasks("job1", specs(5)) == 5
    assert await store.add_tasks("job1", specs(8)) == 3  # 0..4 already there
    assert await store.add_tasks("job1", iter(specs(2))) == 0
    assert (await store.counts("job1"))[TaskState.PENDING] == 8
    assert await store.get_task_body("job1", 6) == spec(6).body
    assert await store.get_task_body("job1", 99) is None


async def test_tasks_of_two_jobs_are_separate(store: JobStore) -> None:
    await store.create_job(job("a"))
    await store.create_job(job("b"))
    await store.add_tasks("a", specs(3))
    await store.add_tasks("b", specs(2))
    assert [t.seq for t in await store.claim_tasks("b", 10)] == [0, 1]
    assert (await store.counts("a"))[TaskState.PENDING] == 3


async def test_claim_in_seq_order_without_double_claims(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", reversed(specs(10)))
    first = await store.claim_tasks("job1", 4)
    assert first == specs(4)
    second = await store.claim_tasks("job1", 4)
    assert [t.seq for t in second] == [4, 5, 6, 7]
    assert [t.seq for t in await store.claim_tasks("job1", 100)] == [8, 9]
    assert await store.claim_tasks("job1", 5) == []
    assert await store.claim_tasks("job1", 0) == []
    counts = await store.counts("job1")
    assert counts == {
        TaskState.PENDING: 0,
        TaskState.RUNNING: 10,
        TaskState.SUCCEEDED: 0,
        TaskState.FAILED: 0,
    }


async def test_concurrent_claims_never_overlap(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(200))
    batches = await asyncio.gather(*(store.claim_tasks("job1", 7) for _ in range(40)))
    seqs = [t.seq for batch in batches for t in batch]
    assert sorted(seqs) == list(range(200))


async def test_claim_seqs_claims_exactly_the_pending_ones_named(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(8))
    await store.claim_tasks("job1", 2)  # 0, 1 running
    await store.complete_tasks("job1", [outcome(1)])  # 1 succeeded
    claimed = await store.claim_seqs("job1", [6, 0, 1, 3, 3, 42])
    assert claimed == [spec(3), spec(6)]  # by seq; running, succeeded, unknown and repeats ignored
    assert await store.claim_seqs("job1", [3, 6]) == []
    assert await store.claim_seqs("job1", []) == []
    counts = await store.counts("job1")
    assert (counts[TaskState.PENDING], counts[TaskState.RUNNING]) == (4, 3)
    assert [t.seq for t in await store.claim_tasks("job1", 10)] == [2, 4, 5, 7]  # never hands 3, 6 out again
    assert await store.requeue_running("job1") == 7
    assert [t.seq for t in await store.claim_seqs("job1", range(8))] == [0, 2, 3, 4, 5, 6, 7]
    with pytest.raises(JobError, match="nope"):
        await store.claim_seqs("nope", [0])


async def test_claim_seqs_and_claim_tasks_never_overlap(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(100))
    calls = [store.claim_seqs("job1", range(i, 100, 3)) for i in range(3)]
    calls += [store.claim_tasks("job1", 9) for _ in range(10)]
    batches = await asyncio.gather(*calls)
    seqs = [t.seq for batch in batches for t in batch]
    assert sorted(seqs) == list(range(100))


async def test_complete_counts_and_totals(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(5))
    await store.claim_tasks("job1", 4)
    await store.complete_tasks(
        "job1",
        [
            outcome(2, attempts=2, prompt_tokens=100, completion_tokens=20, cost_usd=0.5),
            outcome(0, TaskState.FAILED, attempts=3, prompt_tokens=7, completion_tokens=0, cost_usd=0.125),
        ],
    )
    counts = await store.counts("job1")
    assert counts == {TaskState.PENDING: 1, TaskState.RUNNING: 2, TaskState.SUCCEEDED: 1, TaskState.FAILED: 1}
    assert await store.totals("job1") == {
        "prompt_tokens": 107.0,
        "completion_tokens": 20.0,
        "cost_usd": 0.625,
        "attempts": 5.0,
    }
    await store.complete_tasks("job1", [])
    with pytest.raises(ValueError, match="non-terminal"):
        await store.complete_tasks("job1", [outcome(1, TaskState.RUNNING)])


async def test_complete_unknown_seq_writes_nothing(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(2))
    with pytest.raises(JobError, match="job1"):
        await store.complete_tasks("job1", [outcome(0), outcome(42)])
    assert (await store.counts("job1"))[TaskState.SUCCEEDED] == 0


async def test_succeeded_is_final(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(1))
    await store.complete_tasks("job1", [outcome(0, attempts=1)])
    await store.complete_tasks("job1", [outcome(0, TaskState.FAILED, attempts=9)])
    [record] = await collect(store, "job1", ordered=True)
    assert (record.state, record.attempts, record.error) == (TaskState.SUCCEEDED, 1, None)
    assert await store.requeue_running("job1") == 0
    assert await store.claim_tasks("job1", 5) == []


async def test_requeue_running_puts_claims_back(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(6))
    await store.claim_tasks("job1", 4)
    await store.complete_tasks("job1", [outcome(1)])
    assert await store.requeue_running("job1") == 3
    assert await store.requeue_running("job1") == 0
    assert [t.seq for t in await store.claim_tasks("job1", 10)] == [0, 2, 3, 4, 5]


async def test_requeue_failed_clears_the_result(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(3))
    await store.complete_tasks("job1", [outcome(0, TaskState.FAILED), outcome(1)])
    assert await store.requeue_failed("job1") == 1
    record = next(r for r in await collect(store, "job1", ordered=True) if r.seq == 0)
    assert (record.state, record.output_line, record.error, record.completed_order) == (
        TaskState.PENDING,
        None,
        None,
        None,
    )
    assert (await store.totals("job1"))["attempts"] == 1.0


async def test_iter_results_orders(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(6))
    await store.claim_tasks("job1", 5)
    await store.complete_tasks("job1", [outcome(3), outcome(1, TaskState.FAILED)])
    await store.complete_tasks("job1", [outcome(4)])
    await store.complete_tasks("job1", [outcome(0)])

    by_seq = await collect(store, "job1", ordered=True)
    assert [r.seq for r in by_seq] == [0, 1, 2, 3, 4, 5]
    assert [r.state for r in by_seq][2::3] == [TaskState.RUNNING, TaskState.PENDING]
    by_completion = await collect(store, "job1", ordered=False)
    assert [r.seq for r in by_completion] == [3, 1, 4, 0, 2, 5]
    orders = [r.completed_order or 0 for r in by_completion[:4]]
    assert orders == sorted(set(orders))
    assert by_completion[4].completed_order is None

    terminal = {TaskState.SUCCEEDED, TaskState.FAILED}
    assert [r.seq for r in await collect(store, "job1", ordered=True, states=terminal)] == [0, 1, 3, 4]
    failed = await collect(store, "job1", ordered=False, states=[TaskState.FAILED], with_bodies=True)
    assert [(r.seq, r.custom_id, r.line_no, r.error, r.body) for r in failed] == [
        (1, "req-1", 2, "boom 1", spec(1).body)
    ]
    assert failed[0].output_line == outcome(1, TaskState.FAILED).output_line
    assert by_seq[0].body is None


async def test_iter_results_streams_past_one_chunk(store: JobStore) -> None:
    await store.create_job(job())
    n = 2500
    await store.add_tasks("job1", specs(n))
    await store.claim_tasks("job1", n)
    order = [(i * 7919) % n for i in range(n)]  # a permutation: completion order differs from seq order
    for start in range(0, n, 300):
        await store.complete_tasks("job1", [outcome(s) for s in order[start : start + 300]])
    assert [r.seq for r in await collect(store, "job1", ordered=False)] == order
    assert [r.seq for r in await collect(store, "job1", ordered=True)] == list(range(n))


async def test_blobs(store: JobStore) -> None:
    await store.create_job(job())
    assert await store.get_blob("job1", "report") is None
    await store.put_blob("job1", "report", b"\x00one")
    await store.put_blob("job1", "report", b"two")
    await store.put_blob("job1", "stats", b"")
    assert await store.get_blob("job1", "report") == b"two"
    assert await store.get_blob("job1", "stats") == b""


async def test_lock_is_exclusive_and_released(store: JobStore) -> None:
    await store.create_job(job())
    with store.lock_job("job1"):
        with pytest.raises(JobLockedError, match="job1"), store.lock_job("job1"):
            pass
        with store.lock_job("job2"):  # other jobs are unaffected
            pass
    with store.lock_job("job1"):
        pass


async def test_returned_values_are_copies(store: JobStore) -> None:
    await store.create_job(job())
    await store.add_tasks("job1", specs(1))
    [claimed] = await store.claim_tasks("job1", 1)
    claimed.body["model"] = "changed"
    assert await store.get_task_body("job1", 0) == spec(0).body
    got = await store.get_job("job1")
    assert got is not None
    got.options.spec.metadata["team"] = "changed"  # type: ignore[index]
    again = await store.get_job("job1")
    assert again is not None
    assert again.options.spec.metadata == {"team": "search"}


async def test_route_and_step_round_trip(store: JobStore) -> None:
    """Fan-out and pipeline tasks carry their route and step through every read; plain tasks None."""
    await store.create_job(job())
    tagged = [replace(spec(i), route=f"route-{i}", step=f"step-{i % 2}") for i in range(3)]
    await store.add_tasks("job1", [spec(3), *tagged])
    claimed = await store.claim_tasks("job1", 2)
    assert [(s.seq, s.route, s.step) for s in claimed] == [(0, "route-0", "step-0"), (1, "route-1", "step-1")]
    again = await store.claim_seqs("job1", [2, 3])
    assert [(s.seq, s.route, s.step) for s in again] == [(2, "route-2", "step-0"), (3, None, None)]
    await store.complete_tasks("job1", [outcome(0)])
    rows = await collect(store, "job1", ordered=True)
    assert [(r.seq, r.route, r.step) for r in rows] == [
        (0, "route-0", "step-0"),
        (1, "route-1", "step-1"),
        (2, "route-2", "step-0"),
        (3, None, None),
    ]
    done = await collect(store, "job1", ordered=False, states=[TaskState.SUCCEEDED])
    assert [(r.seq, r.route, r.step, r.cost_usd) for r in done] == [(0, "route-0", "step-0", 0.25)]
