"""OUT lines, errors-file lines that read back as input, and atomic private writes."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import orjson
import pytest

from batchgate.errors import JobError
from batchgate.jobs.input.read import read_tasks
from batchgate.jobs.output.files import (
    format_error_line,
    format_errors_file_line,
    format_success_line,
    request_id_for,
    write_outputs,
)
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.models import Usage

from .factories import job

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}


def test_success_line_has_the_openai_batch_shape() -> None:
    raw = format_success_line(
        "r1",
        request_id="req_abc",
        status_code=200,
        body=COMPLETION,
        provider="openai",
        attempts=2,
        latency_ms=123.456,
        usage=Usage(prompt_tokens=5, completion_tokens=1, cached_tokens=2),
        extra={"model": "gpt-4o-mini", "custom_id": "ignored"},
    )
    assert b"\n" not in raw
    assert orjson.loads(raw) == {
        "id": request_id_for("r1"),
        "custom_id": "r1",
        "response": {"status_code": 200, "request_id": "req_abc", "body": COMPLETION},
        "error": None,
        "provider": "openai",
        "attempts": 2,
        "latency_ms": 123.5,
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6, "cached_tokens": 2},
        "model": "gpt-4o-mini",
    }


def test_request_ids_are_stable_and_distinct() -> None:
    assert request_id_for("a") == request_id_for("a")
    assert request_id_for("a") != request_id_for("b")
    assert request_id_for("a").startswith("batch_req_")


def test_error_line_with_and_without_a_status() -> None:
    with_status = orjson.loads(
        format_error_line(
            "r2",
            status_code=400,
            code="bad_request",
            message="bad",
            provider="openai",
            attempts=1,
            latency_ms=5,
        )
    )
    assert with_status["response"] == {
        "status_code": 400,
        "request_id": None,
        "body": {"error": {"code": "bad_request", "message": "bad"}},
    }
    assert with_status["error"] == {"code": "bad_request", "message": "bad"}
    no_status = orjson.loads(
        format_error_line(
            "r3",
            status_code=None,
            code="timeout",
            message="no answer",
            provider=None,
            attempts=3,
            latency_ms=0,
        )
    )
    assert (no_status["response"], no_status["error"]["code"], no_status["usage"]) == (None, "timeout", None)


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        {"max_tokens": 9, "temperature": 0.5, "messages": [{"role": "user", "content": "é"}], "model": "m"},
    ],
)
def test_errors_file_line_reads_back_as_the_same_task(tmp_path: Path, body: dict[str, Any]) -> None:
    raw = format_errors_file_line(body, "r9", {"code": "server_error", "message": "boom"})
    assert list(orjson.loads(raw))[:3] == ["custom_id", "model", "messages"]
    path = tmp_path / "errors.jsonl"
    path.write_bytes(raw + b"\n")
    assert list(read_tasks(path)) == [TaskSpec(0, 1, "r9", body)]


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def finished_store() -> JobStore:
    store = MemoryJobStore()
    await store.create_job(job())
    bodies = [{"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(4)]
    await store.add_tasks("job1", [TaskSpec(i, i + 1, f"r{i}", b) for i, b in enumerate(bodies)])
    await store.claim_tasks("job1", 4)
    ok = [
        TaskOutcome(
            i,
            TaskState.SUCCEEDED,
            1,
            format_success_line(
                f"r{i}",
                request_id=None,
                status_code=200,
                body=COMPLETION,
                provider="p",
                attempts=1,
                latency_ms=1,
                usage=None,
            ),
            None,
            "p",
        )
        for i in (3, 0)
    ]
    bad = format_error_line(
        "r1", status_code=500, code="server_error", message="boom", provider="p", attempts=3, latency_ms=1
    )
    await store.complete_tasks("job1", [ok[0], TaskOutcome(1, TaskState.FAILED, 3, bad, "boom", "p"), ok[1]])
    return store  # task 2 is still running


async def test_write_outputs_in_completion_and_input_order(tmp_path: Path) -> None:
    store = await finished_store()
    out, errors = tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
    assert await write_outputs(store, "job1", out, errors, ordered=False) == (3, 1)
    assert [orjson.loads(line)["custom_id"] for line in out.read_bytes().splitlines()] == ["r3", "r1", "r0"]
    assert await write_outputs(store, "job1", out, errors, ordered=True) == (3, 1)
    assert [orjson.loads(line)["custom_id"] for line in out.read_bytes().splitlines()] == ["r0", "r1", "r3"]
    [line] = errors.read_bytes().splitlines()
    assert orjson.loads(line)["error"] == {"code": "server_error", "message": "boom"}
    assert list(read_tasks(errors)) == [TaskSpec(0, 1, "r1", await store.get_task_body("job1", 1) or {})]
    for path in (out, errors):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert names(tmp_path) == ["errors.jsonl", "out.jsonl"]  # no temp files left


async def test_write_outputs_without_an_errors_file(tmp_path: Path) -> None:
    store = await finished_store()
    assert await write_outputs(store, "job1", tmp_path / "out.jsonl", None, ordered=True) == (3, 1)
    assert names(tmp_path) == ["out.jsonl"]


async def test_unwritable_path_fails_before_anything_is_written(tmp_path: Path) -> None:
    store = await finished_store()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file, so nothing can be created beneath it\n")
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"previous\n")
    with pytest.raises(JobError, match=r"not-a-dir/errors\.jsonl: cannot write"):
        await write_outputs(store, "job1", out, blocker / "errors.jsonl", ordered=True)
    assert out.read_bytes() == b"previous\n"  # untouched
    assert names(tmp_path) == ["not-a-dir", "out.jsonl"]
    with pytest.raises(JobError, match="is a directory"):
        await write_outputs(store, "job1", tmp_path, None, ordered=True)
