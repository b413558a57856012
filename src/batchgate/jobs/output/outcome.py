"""Task outcomes, built one way for live and batch results: the OUT line (`output`) and the stored
`TaskOutcome` of a task that succeeded or failed, and the message of an answer the output check
refused; and the one `task_failed` log event of a task failed for good, live or batch
(`log_failed`). Counting them into progress is `Progress.record`."""

from __future__ import annotations

from typing import Any

from batchgate.jobs.output.files import format_error_line, format_success_line
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec, TaskState
from batchgate.logs import WARNING, event, get_logger
from batchgate.models import Usage
from batchgate.request_fields import task_metadata

_log = get_logger("task")
ERROR_CHARS = 500  # the stored error text is cut here
ANSWER_CHARS = 200  # of a refused answer, quoted in its error message


def refused_message(problem: str, answer: str | None) -> str:
    """The error message of a task whose answer the output check refused."""
    return f"{problem} (answer: {(answer or '')[:ANSWER_CHARS]!r})"


def succeeded(
    spec: TaskSpec,
    *,
    body: dict[str, Any],
    usage: Usage,
    cost: float,
    provider: str | None,
    attempts: int,
    latency_ms: float,
    status_code: int = 200,
    request_id: str | None = None,
) -> TaskOutcome:
    """A kept answer: its OUT line and tokens, and every cent the task was billed."""
    line = format_success_line(
        spec.custom_id,
        request_id=request_id,
        status_code=status_code,
        body=body,
        provider=provider,
        attempts=attempts,
        latency_ms=latency_ms,
        usage=usage,
        extra=task_metadata(spec.body),  # the input line's metadata, written back as given
    )
    return TaskOutcome(
        seq=spec.seq,
        state=TaskState.SUCCEEDED,
        attempts=attempts,
        output_line=line,
        error=None,
        provider=provider,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_usd=cost,
    )


def failed(
    spec: TaskSpec,
    *,
    code: str,
    message: str,
    status_code: int | None,
    provider: str | None,
    attempts: int,
    latency_ms: float = 0.0,
    cost: float = 0.0,
) -> TaskOutcome:
    """A failed task: its error OUT line, no tokens kept, and what it was billed all the same."""
    line = format_error_line(
        spec.custom_id,
        status_code=status_code,
        code=code,
        message=message,
        provider=provider,
        attempts=attempts,
        latency_ms=latency_ms,
        extra=task_metadata(spec.body),
    )
    return TaskOutcome(
        seq=spec.seq,
        state=TaskState.FAILED,
        attempts=attempts,
        output_line=line,
        error=f"{code}: {message}"[:ERROR_CHARS],
        provider=provider,
        prompt_tokens=0,
        completion_tokens=0,
        cost_usd=cost,
    )


def log_failed(
    spec: TaskSpec, *, code: str, status: int | None, provider: str | None, attempts: int, mode: str = "live"
) -> None:
    """A task failed for good: one `task_failed` event, its custom_id and error kind only (never the
    message, which may quote the prompt). `mode`: "live" or "batch"."""
    event(
        _log,
        WARNING,
        "task_failed",
        task=spec.custom_id,
        seq=spec.seq,
        error=code,
        status=status,
        provider=provider,
        attempts=attempts,
        mode=mode,
    )
