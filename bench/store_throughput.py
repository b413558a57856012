"""How fast the SQLite job store records work. Prints figures; asserts nothing.

    python bench/store_throughput.py [--tasks 1000000] [--completions 200000] [--dir DIR]

1. completions/s recorded through the GroupCommitter (target >= 5,000/s);
2. the time to add --tasks tasks to one job;
3. on that job, with about half the tasks finished and 1,000 in flight (a crash), the time of
   `requeue_running` + the first `claim_tasks(1000)` — what a resumed run waits before sending.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from batchgate.clock import LoopClock
from batchgate.jobs.commit import GroupCommitter
from batchgate.jobs.store.protocol import JobRecord, TaskOutcome, TaskSpec, TaskState
from batchgate.jobs.store.sqlite import SqliteJobStore

_OUT = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "x" * 300}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 40, "completion_tokens": 80, "total_tokens": 120},
}


def _job(job_id: str) -> JobRecord:
    now = time.time()
    return JobRecord(job_id, "in.jsonl", "0" * 64, "out.jsonl", "cfg.yaml", "running", None, now, now, 0, {})


def _tasks(n: int) -> Iterator[TaskSpec]:
    for seq in range(n):
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"Summarise item {seq}."}]}
        yield TaskSpec(seq, seq + 1, f"req-{seq}", body)


def _outcome(seq: int) -> TaskOutcome:
    line = orjson.dumps({"id": f"batch_req_{seq}", "custom_id": f"req-{seq}", "response": {"body": _OUT}})
    return TaskOutcome(seq, TaskState.SUCCEEDED, 1, line, None, "openai", 40, 80, 0.0001)


async def bench_completions(db: Path, n: int) -> None:
    store = await SqliteJobStore.open(db)
    try:
        await store.create_job(_job("commit"))
        await store.add_tasks("commit", _tasks(n))
        claimed = 0
        while claimed < n:
            claimed += len(await store.claim_tasks("commit", 10_000))
        outcomes = [_outcome(seq) for seq in range(n)]
        committer = GroupCommitter(store, "commit", LoopClock(), max_batch=1000, max_delay=0.05)
        start = time.perf_counter()
        for i, outcome in enumerate(outcomes):
            committer.add(outcome)
            if i % 100 == 99:
                await asyncio.sleep(0)  # workers finishing requests yield to the loop between results
        await committer.close()
        elapsed = time.perf_counter() - start
        done = (await store.counts("commit"))[TaskState.SUCCEEDED]
        print(f"completions recorded:  {done:,} in {elapsed:.2f} s = {done / elapsed:,.0f} completions/s "
              f"({committer.transactions} transactions)")  # fmt: skip
    finally:
        await store.close()


async def bench_big_job(db: Path, n: int) -> None:
    store = await SqliteJobStore.open(db)
    try:
        await store.create_job(_job("big"))
        start = time.perf_counter()
        added = await store.add_tasks("big", _tasks(n))
        elapsed = time.perf_counter() - start
        print(f"add tasks:             {added:,} in {elapsed:.2f} s = {added / elapsed:,.0f} tasks/s")

        half = n // 2
        claimed = 0
        while claimed < half:
            batch = await store.claim_tasks("big", min(10_000, half - claimed))
            claimed += len(batch)
            finished = [_outcome(t.seq) for t in batch if t.seq < half - 1000]
            await store.complete_tasks("big", finished)
        counts = await store.counts("big")
        start = time.perf_counter()
        requeued = await store.requeue_running("big")
        first = await store.claim_tasks("big", 1000)
        elapsed = time.perf_counter() - start
        print(f"requeue + first claim: {elapsed * 1000:.1f} ms on a {n:,}-task job "
              f"({counts[TaskState.SUCCEEDED]:,} done, {requeued:,} requeued, first claim {len(first)} "
              f"from seq {first[0].seq if first else '-'})")  # fmt: skip
        start = time.perf_counter()
        await store.counts("big")
        print(f"counts():              {(time.perf_counter() - start) * 1000:.1f} ms")
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--completions", type=int, default=200_000)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to put the databases (default: a temp dir)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        await bench_completions(Path(tmp) / "commit.db", args.completions)
        await bench_big_job(Path(tmp) / "big.db", args.tasks)


if __name__ == "__main__":
    asyncio.run(main())
