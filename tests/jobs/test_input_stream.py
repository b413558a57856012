"""A plain job's input stored behind the sending, in process against a real SQLite store: a run that
died after storing only the first tasks is continued by the next (each task stored once, seqs
dense, the whole file's sha256 and mark recorded), and a prefix edited since is refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from batchgate.clock import LoopClock
from batchgate.config import GatewayConfig, config_from_dict
from batchgate.errors import InputChangedError
from batchgate.jobs.ingest import FIRST_CHUNK, INGEST_BLOB, IngestMark
from batchgate.jobs.input_stream import end_ingest, set_up_job
from batchgate.jobs.job_setup import RunRequest
from batchgate.jobs.store.sqlite import SqliteJobStore

N = FIRST_CHUNK * 3 + 7


def _config() -> GatewayConfig:
    return config_from_dict(
        {
            "providers": [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
            "routes": [{"model": "m", "targets": ["alpha"]}],
        },
        source="test.yaml",
    )


def _write(path: Path, first_id: str = "t0") -> None:
    lines = [{"custom_id": f"t{i}", "model": "m", "prompt": f"item {i}"} for i in range(N)]
    lines[0]["custom_id"] = first_id
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


async def test_a_run_that_died_after_the_first_tasks_is_continued_by_the_next(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    _write(src)
    req = RunRequest(src, tmp_path / "gw.yaml", tmp_path / "out.jsonl")
    store = await SqliteJobStore.open(tmp_path / "jobs.db")
    try:
        job, ingest = await set_up_job(store, "job1", req, _config(), LoopClock(), print)
        assert ingest is not None
        assert job.input_sha256 == ""  # not all stored yet
        assert sum((await store.counts("job1")).values()) == FIRST_CHUNK  # the run died here

        job, ingest = await set_up_job(store, "job1", req, _config(), LoopClock(), print)
        assert ingest is not None
        assert ingest.stored == FIRST_CHUNK
        assert await ingest.run()
        await end_ingest(store, "job1", ingest, req, _config(), print)
        seqs = [r.seq async for r in store.iter_results("job1", ordered=True)]
        assert seqs == list(range(N))
        stored = await store.get_job("job1")
        assert stored is not None
        assert stored.input_sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
        assert stored.task_total == N
        mark = IngestMark.load(await store.get_blob("job1", INGEST_BLOB))
        assert mark is not None
        assert mark.done
        assert mark.offset == src.stat().st_size

        job, ingest = await set_up_job(store, "job1", req, _config(), LoopClock(), print)
        assert ingest is None  # all stored: nothing to read
    finally:
        await store.close()


async def test_an_edit_to_the_stored_part_is_a_changed_input(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    _write(src)
    req = RunRequest(src, tmp_path / "gw.yaml", tmp_path / "out.jsonl")
    store = await SqliteJobStore.open(tmp_path / "jobs.db")
    try:
        await set_up_job(store, "job1", req, _config(), LoopClock(), print)
        _write(src, first_id="renamed")
        with pytest.raises(InputChangedError, match="changed since job job1 started"):
            await set_up_job(store, "job1", req, _config(), LoopClock(), print)
    finally:
        await store.close()
