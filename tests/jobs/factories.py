"""Small builders for job-store tests."""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.config import JobSpec
from batchgate.jobs.store.options import JobOptions
from batchgate.jobs.store.protocol import JobRecord, TaskOutcome, TaskSpec, TaskState


def job(job_id: str = "job1", *, created_at: float = 100.0, task_total: int = 0) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        input_path="/data/in.jsonl",
        input_sha256="ab" * 32,
        output_path="/data/out.jsonl",
        config_path="/data/batchgate.yaml",
        status="created",
        stop_reason=None,
        created_at=created_at,
        updated_at=created_at,
        task_total=task_total,
        options=JobOptions(skip_invalid=True, spec=JobSpec(name="nightly", metadata={"team": "search"})),
    )


def body(seq: int, model: str = "gpt-test") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": f"question {seq} é ✓"}], "max_tokens": 5}


def spec(seq: int) -> TaskSpec:
    return TaskSpec(seq=seq, line_no=seq + 1, custom_id=f"req-{seq}", body=body(seq))


def specs(n: int, start: int = 0) -> list[TaskSpec]:
    return [spec(i) for i in range(start, start + n)]


def outcome(
    seq: int,
    state: TaskState = TaskState.SUCCEEDED,
    *,
    attempts: int = 1,
    prompt_tokens: int = 10,
    completion_tokens: int = 3,
    cost_usd: float = 0.25,
) -> TaskOutcome:
    failed = state is TaskState.FAILED
    line = {"custom_id": f"req-{seq}", "ok": not failed}
    if failed:
        line["error"] = {"code": "server_error", "message": f"boom {seq}"}
    return TaskOutcome(
        seq=seq,
        state=state,
        attempts=attempts,
        output_line=orjson.dumps(line),
        error=f"boom {seq}" if failed else None,
        provider="openai",
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost_usd,
    )


class ManualWall:
    """A wall clock that moves only when the test says so."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
