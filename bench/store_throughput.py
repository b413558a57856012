"""How fast the job stores record work, SQLite and Postgres side by side. Prints figures; asserts nothing.

    python bench/store_throughput.py [--tasks 1000000] [--completions 200000] [--chunk-tasks 50000]
                                     [--stores sqlite,postgres] [--postgres URL] [--dir DIR]

For each store:
1. completions/s recorded through the GroupCommitter (target >= 5,000/s);
2. the chunk cycle workers run — `claim_chunk(100)` then `commit_chunk` — in tasks/s, for one
   worker and for 4 concurrent ones (coroutines sharing the store);
3. the time to add --tasks tasks to one job;
4. on that job, with about half the tasks finished and 1,000 in flight (a crash), the time of
   `requeue_running` + the first `claim_tasks(1000)` — what a resumed run waits before sending.
Postgres runs in a fresh schema that is dropped afterwards (default URL: the local test server).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson

from batchgate.clock import LoopClock
from batchgate.jobs.commit import GroupCommitter
from batchgate.jobs.store.protocol import JobRecord, JobStore, TaskOutcome, TaskSpec, TaskState
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
_PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


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


@asynccontextmanager
async def _open(kind: str, tmp: Path, name: str, pg_url: str) -> AsyncIterator[JobStore]:
    """A fresh, empty store of `kind`: a new SQLite file, or a new Postgres schema dropped after."""
    if kind == "sqlite":
        store: JobStore = await SqliteJobStore.open(tmp / f"{name}.db")
        try:
            yield store
        finally:
            await store.close()
        return
    import psycopg  # noqa: PLC0415 — the Postgres extra only when it is measured

    from batchgate.jobs.store.postgres import PgJobStore  # noqa: PLC0415 — as above

    schema = f"bench_{name}_{secrets.token_hex(4)}"
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in pg_url else "?"
        store = await PgJobStore.open(f"{pg_url}{sep}options=-csearch_path%3D{schema}")
        try:
            yield store
        finally:
            await store.close()
            await admin.execute(f"DROP SCHEMA {schema} CASCADE")


async def bench_completions(store: JobStore, n: int) -> str:
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
    return (f"completions recorded:  {done:,} in {elapsed:.2f} s = {done / elapsed:,.0f} completions/s "
            f"({committer.transactions} transactions)")  # fmt: skip


async def _worker(store: JobStore, job_id: str, owner: str, size: int) -> int:
    done = 0
    while chunk := await store.claim_chunk(job_id, size, owner=owner, lease_seconds=60):
        await store.commit_chunk(job_id, chunk.token, [_outcome(t.seq) for t in chunk.tasks])
        await store.release_chunk(job_id, chunk.token)
        done += len(chunk.tasks)
    return done


async def bench_chunks(store: JobStore, n: int, workers: int, size: int = 100) -> str:
    job_id = f"chunks{workers}"
    await store.create_job(_job(job_id))
    await store.add_tasks(job_id, _tasks(n))
    start = time.perf_counter()
    done = sum(await asyncio.gather(*(_worker(store, job_id, f"w{i}", size) for i in range(workers))))
    elapsed = time.perf_counter() - start
    assert (await store.counts(job_id))[TaskState.SUCCEEDED] == n == done
    who = f"{workers} worker" + ("s" if workers > 1 else " ")
    return (f"chunk cycle, {who}: {done:,} tasks in {elapsed:.2f} s = {done / elapsed:,.0f} tasks/s "
            f"(claim_chunk({size}) + commit_chunk + release_chunk)")  # fmt: skip


async def bench_big_job(store: JobStore, n: int) -> list[str]:
    lines: list[str] = []
    await store.create_job(_job("big"))
    start = time.perf_counter()
    added = await store.add_tasks("big", _tasks(n))
    elapsed = time.perf_counter() - start
    lines.append(f"add tasks:             {added:,} in {elapsed:.2f} s = {added / elapsed:,.0f} tasks/s")
    half = n // 2
    claimed = 0
    while claimed < half:
        batch = await store.claim_tasks("big", min(10_000, half - claimed))
        claimed += len(batch)
        await store.complete_tasks("big", [_outcome(t.seq) for t in batch if t.seq < half - 1000])
    counts = await store.counts("big")
    start = time.perf_counter()
    requeued = await store.requeue_running("big")
    first = await store.claim_tasks("big", 1000)
    elapsed = time.perf_counter() - start
    lines.append(f"requeue + first claim: {elapsed * 1000:.1f} ms on a {n:,}-task job "
                 f"({counts[TaskState.SUCCEEDED]:,} done, {requeued:,} requeued, first claim {len(first)} "
                 f"from seq {first[0].seq if first else '-'})")  # fmt: skip
    start = time.perf_counter()
    await store.counts("big")
    lines.append(f"counts():              {(time.perf_counter() - start) * 1000:.1f} ms")
    return lines


async def bench_store(kind: str, tmp: Path, args: argparse.Namespace) -> None:
    print(f"== {kind} ==", flush=True)
    async with _open(kind, tmp, "commit", args.postgres) as store:
        print(await bench_completions(store, args.completions), flush=True)
    for workers in (1, 4):
        async with _open(kind, tmp, f"chunks{workers}", args.postgres) as store:
            print(await bench_chunks(store, args.chunk_tasks, workers), flush=True)
    async with _open(kind, tmp, "big", args.postgres) as store:
        print("\n".join(await bench_big_job(store, args.tasks)), flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--completions", type=int, default=200_000)
    parser.add_argument("--chunk-tasks", type=int, default=50_000)
    parser.add_argument("--stores", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--postgres", default=_PG_DEFAULT, help="Postgres URL (default: %(default)s)")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to put the SQLite databases (default: a temp dir)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for kind in args.stores.split(","):
            await bench_store(kind.strip(), Path(tmp), args)


if __name__ == "__main__":
    asyncio.run(main())
