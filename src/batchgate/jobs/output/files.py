"""The output files: OUT lines in the OpenAI Batch output shape, and an errors file fit to re-run.

OUT gets one line per finished task, `{id, custom_id, response, error}` plus batchgate's own
`provider`, `attempts`, `latency_ms` and `usage`. The errors file holds each failed task as a plain
input line (`{custom_id, model, messages, ..., "error": {...}}`) that `read_tasks` accepts again.
Both are written atomically: a temporary file in the same directory, fsync, `os.replace`, mode 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import IO, Any

import orjson

from batchgate.errors import JobError
from batchgate.jobs.input.skipped import SKIPPED_BLOB
from batchgate.jobs.store.protocol import JobStore, TaskRecord, TaskState
from batchgate.models import Usage
from batchgate.request_fields import TASK_METADATA, task_metadata

_WRITE_BUFFER = 1 << 20


def request_id_for(custom_id: str) -> str:
    """A stable `batch_req_<hex>` id for a custom_id."""
    return "batch_req_" + hashlib.blake2b(custom_id.encode("utf-8"), digest_size=16).hexdigest()


def _usage(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.cached_tokens,
    }


def format_success_line(
    custom_id: str,
    *,
    request_id: str | None,
    status_code: int,
    body: dict[str, Any] | orjson.Fragment,
    provider: str | None,
    attempts: int,
    latency_ms: float,
    usage: Usage | None,
    extra: dict[str, object] | None = None,
) -> bytes:
    """One OUT line (no newline) for a request that succeeded."""
    line: dict[str, object] = {
        "id": request_id_for(custom_id),
        "custom_id": custom_id,
        "response": {"status_code": status_code, "request_id": request_id, "body": body},
        "error": None,
        "provider": provider,
        "attempts": attempts,
        "latency_ms": round(latency_ms, 1),
        "usage": _usage(usage),
    }
    if extra:
        line.update({k: v for k, v in extra.items() if k not in line})
    return orjson.dumps(line)


def format_error_line(
    custom_id: str,
    *,
    status_code: int | None,
    code: str,
    message: str,
    provider: str | None,
    attempts: int,
    latency_ms: float,
    extra: dict[str, object] | None = None,
) -> bytes:
    """One OUT line (no newline) for a request that failed; `response` only if a status came back."""
    error = {"code": code, "message": message}
    response = None
    if status_code is not None:
        response = {"status_code": status_code, "request_id": None, "body": {"error": dict(error)}}
    line: dict[str, object] = {
        "id": request_id_for(custom_id),
        "custom_id": custom_id,
        "response": response,
        "error": error,
        "provider": provider,
        "attempts": attempts,
        "latency_ms": round(latency_ms, 1),
        "usage": None,
    }
    if extra:
        line.update({k: v for k, v in extra.items() if k not in line})
    return orjson.dumps(line)


def format_errors_file_line(original_body: dict[str, Any], custom_id: str, error: dict[str, object]) -> bytes:
    """An input line for a failed task, carrying its error (ignored when read back): the plain
    shape, or the OpenAI Batch shape when its metadata came from a batch line's own fields (read
    back, either gives the task the same metadata)."""
    meta = task_metadata(original_body)
    body: dict[str, object] = {"custom_id": custom_id}
    for key in ("model", "messages"):
        if key in original_body:
            body[key] = original_body[key]
    for key, value in original_body.items():
        if key not in body and key not in ("custom_id", "error", "batchgate", TASK_METADATA):
            body[key] = value
    if set(meta) <= {"metadata"}:  # a plain line's own `metadata` (or none)
        line = body | meta
    else:
        del body["custom_id"]
        line = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body} | meta
    line["error"] = error
    return orjson.dumps(line)


def _error_of(record: TaskRecord) -> dict[str, object]:
    """The `error` object of a failed task's OUT line, or one made from its stored message."""
    if record.output_line:
        with contextlib.suppress(orjson.JSONDecodeError):
            parsed = orjson.loads(record.output_line)
            if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
                return dict(parsed["error"])
    return {"code": "failed", "message": record.error or "failed"}


async def write_outputs(
    store: JobStore,
    job_id: str,
    out_path: str | Path | None,
    errors_path: str | Path | None,
    *,
    ordered: bool,
) -> tuple[int, int]:
    """Write OUT (every finished task) and the errors file (the lines `--skip-invalid` left out,
    then the failed tasks); returns their line counts (None: that file is not written, OUT's
    count is then 0).

    Both files appear whole or not at all. A path that cannot be written raises `JobError` naming it
    before either file is touched.
    """
    paths = [Path(p) if p is not None else None for p in (out_path, errors_path)]
    temps: list[tuple[Path, str, IO[bytes]]] = []
    try:
        for target in paths:
            if target is not None:
                temps.append((target, *_open_temp(target)))
        files = iter(f for _, _, f in temps)
        out, errs = (next(files) if p is not None else None for p in paths)
        try:
            written, failed = await _write_out(store, job_id, out, ordered)
            if errs is not None:
                await _write_errors(store, job_id, errs, ordered)
        except OSError as exc:
            raise JobError(f"{temps[0][0]}: cannot write the output files ({exc.strerror})") from None
        await asyncio.to_thread(_commit, temps)
    finally:
        for _, temp, f in temps:
            # Committed files were flushed already; on failure the temp is discarded, and closing it
            # may flush into the same full disk: that must not mask the one-line error above.
            with contextlib.suppress(OSError):
                f.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
    return written, failed


async def _write_out(store: JobStore, job_id: str, out: IO[bytes] | None, ordered: bool) -> tuple[int, int]:
    """OUT's lines (when `out` is given) and the count of failed tasks."""
    if out is None:
        counts = await store.counts(job_id)
        return 0, counts[TaskState.FAILED]
    written = failed = 0
    terminal = (TaskState.SUCCEEDED, TaskState.FAILED)
    async for record in store.iter_results(job_id, ordered=ordered, states=terminal):
        if record.output_line is not None:
            out.write(record.output_line + b"\n")
            written += 1
        failed += record.state is TaskState.FAILED
    return written, failed


async def _write_errors(store: JobStore, job_id: str, errs: IO[bytes], ordered: bool) -> None:
    errs.write(await store.get_blob(job_id, SKIPPED_BLOB) or b"")  # --skip-invalid's lines
    failures = store.iter_results(job_id, ordered=ordered, states=[TaskState.FAILED], with_bodies=True)
    async for record in failures:
        if record.body is not None:
            errs.write(format_errors_file_line(record.body, record.custom_id, _error_of(record)) + b"\n")


def _open_temp(target: Path) -> tuple[str, IO[bytes]]:
    if target.is_dir():
        raise JobError(f"{target}: is a directory, cannot write the output file there")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    except OSError as exc:
        raise JobError(f"{target}: cannot write the output file ({exc.strerror})") from None
    os.fchmod(fd, 0o600)
    return temp, os.fdopen(fd, "wb", buffering=_WRITE_BUFFER)


def _commit(temps: list[tuple[Path, str, IO[bytes]]]) -> None:
    """fsync every temporary file, then move each over its target, then fsync the directories."""
    for target, _, f in temps:
        try:
            f.flush()
            os.fsync(f.fileno())
        except OSError as exc:
            raise JobError(f"{target}: cannot write the output file ({exc.strerror})") from None
    for target, temp, _ in temps:
        try:
            os.replace(temp, target)
        except OSError as exc:
            raise JobError(f"{target}: cannot write the output file ({exc.strerror})") from None
    for directory in {target.parent for target, _, _ in temps}:
        _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
