"""OUT appended as results commit (`LiveOutput`): brought in line with the store before appending,
whole lines appended after each commit, and `finish_job` keeping it only when it is complete."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from batchgate.jobs.finish import OutputFiles, finish_job
from batchgate.jobs.output.live import LiveOutput, whole_lines
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import JobStore, TaskState

from .factories import job, outcome, specs


async def _store(done: int, total: int = 6) -> JobStore:
    store = MemoryJobStore()
    await store.create_job(job(task_total=total))
    await store.add_tasks("job1", specs(total))
    await store.claim_tasks("job1", total)
    if done:
        await store.complete_tasks("job1", [outcome(i) for i in range(done)])
    return store


def _ids(path: Path) -> list[str]:
    return [orjson.loads(line)["custom_id"] for line in path.read_bytes().splitlines()]


def test_whole_lines_counts_lines_and_refuses_a_half_line(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    assert whole_lines(path) == 0  # missing
    path.write_bytes(b"")
    assert whole_lines(path) == 0
    path.write_bytes(b"{}\n{}\n")
    assert whole_lines(path) == 2
    path.write_bytes(b'{}\n{"half')
    assert whole_lines(path) is None


async def test_a_file_that_does_not_match_the_store_is_rewritten_from_it(tmp_path: Path) -> None:
    store = await _store(done=2)
    path = tmp_path / "out.jsonl"
    path.write_bytes(
        b'{"custom_id": "req-0"}\n{"custom_id": "req-1"}\n{"custom_id": "req-'
    )  # killed mid-line
    live = await LiveOutput.open(store, "job1", path)
    assert _ids(path) == ["req-0", "req-1"]
    live.committed([outcome(2), outcome(3, TaskState.FAILED)])
    assert live.close() == 4
    assert _ids(path) == ["req-0", "req-1", "req-2", "req-3"]
    assert path.stat().st_mode & 0o777 == 0o600


async def test_a_file_that_matches_the_store_is_continued_in_place(tmp_path: Path) -> None:
    store = await _store(done=2)
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(outcome(i).output_line + b"\n" for i in range(2)))
    inode = path.stat().st_ino
    live = await LiveOutput.open(store, "job1", path)
    live.committed([outcome(2)])
    assert live.close() == 3
    assert path.stat().st_ino == inode
    assert _ids(path) == ["req-0", "req-1", "req-2"]


async def test_finish_keeps_a_complete_appended_file_and_rewrites_an_incomplete_one(tmp_path: Path) -> None:
    store = await _store(done=0, total=3)
    files = OutputFiles(tmp_path / "out.jsonl", tmp_path / "out.jsonl.errors.jsonl")
    live = await LiveOutput.open(store, "job1", files.output)
    done = [outcome(0), outcome(1), outcome(2, TaskState.FAILED)]
    await store.complete_tasks("job1", done)
    live.committed(done)
    appended = live.close()
    inode = files.output.stat().st_ino
    finished = await finish_job(store, "job1", files, [], stop_reason=None, appended=appended)
    assert (finished.written, finished.failed) == (3, 1)
    assert files.output.stat().st_ino == inode  # kept: not rewritten
    assert [orjson.loads(x)["custom_id"] for x in files.errors.read_bytes().splitlines()] == ["req-2"]

    files.output.write_bytes(b"".join(o.output_line + b"\n" for o in done[:2]))  # an append was lost
    finished = await finish_job(store, "job1", files, [], stop_reason=None, appended=2)
    assert finished.written == 3
    assert sorted(_ids(files.output)) == ["req-0", "req-1", "req-2"]


async def test_a_failed_append_leaves_the_file_to_be_rewritten(tmp_path: Path) -> None:
    store = await _store(done=0, total=2)
    path = tmp_path / "out.jsonl"
    live = await LiveOutput.open(store, "job1", path)
    live.committed([outcome(0)])
    os.close(live._fd)  # type: ignore[arg-type]  # the next write fails, as on a full disk
    live.committed([outcome(1)])
    assert live.close() is None
