"""What the job API answers: the job object (state, options, request counts), the detail's
figures (progress, ETA, cost, per-provider figures from the job's report, `jobs/io/report.py`)
and the lines of its results stream."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from batchgate.jobs.engine import JobEngine
from batchgate.jobs.io.report import (
    OPEN_SEGMENT_BLOB,
    REPORT_BLOB,
    build_report,
    fold_open_segment,
    load_segments,
)
from batchgate.jobs.store.protocol import JobStore, TaskRecord, TaskState
from batchgate.server.job_spec import JobSpec
from batchgate.server.job_table import state
from batchgate.server.registry import BatchRecord

PROVIDER_FIGURES = ("request_count", "success_count", "error_count", "rate_limited", "retries",
                    "prompt_tokens", "completion_tokens", "cost_usd")  # fmt: skip


def rfc3339(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def job_object(b: BatchRecord, spec: JobSpec, counts: dict[str, int]) -> dict[str, Any]:
    validate = None
    if spec.validate_regex is not None or spec.validate_schema is not None:
        validate = {"regex": spec.validate_regex, "schema": spec.validate_schema}
    return {
        "id": b.id,
        "object": "job",
        "name": spec.name,
        "state": state(b),
        "priority": spec.priority,
        "created_at": b.created_at,
        "not_before": rfc3339(spec.not_before),
        "deadline": rfc3339(spec.deadline),
        "mode": spec.mode,
        "budget": spec.budget_usd,
        "callback_url": spec.callback_url,
        "metadata": spec.metadata,
        "validate": validate,
        "input_file_id": b.input_file_id or None,
        "request_counts": counts,
        "errors": b.errors,
        "times": dict(b.times),
    }


async def job_counts(store: JobStore, b: BatchRecord) -> dict[str, int]:
    """total, succeeded, failed and pending (not yet ended) items, from the store."""
    job = await store.get_job(b.job_id)
    if job is None:
        return {"total": b.requests, "succeeded": 0, "failed": 0, "pending": b.requests}
    counts = await store.counts(b.job_id)
    ok, failed = counts[TaskState.SUCCEEDED], counts[TaskState.FAILED]
    return {
        "total": job.task_total,
        "succeeded": ok,
        "failed": failed,
        "pending": job.task_total - ok - failed,
    }


async def figures(store: JobStore, b: BatchRecord, engine: JobEngine | None, now: float) -> dict[str, Any]:
    """The detail's progress, ETA, cost, tokens and per-provider figures."""
    counts = await job_counts(store, b)
    progress: dict[str, Any] = {**counts, "rate_per_s": None, "eta_s": None}
    if engine is not None:
        p = engine.progress
        done_now, elapsed = p.succeeded + p.failed, now - p.started
        if done_now and elapsed > 0:
            rate = done_now / elapsed
            progress["rate_per_s"] = round(rate, 3)
            progress["eta_s"] = round(counts["pending"] / rate, 1)
    job = await store.get_job(b.job_id)
    empty = {"cost_usd": 0.0, "tokens": {"prompt": 0, "completion": 0}, "providers": {}}
    if job is None:
        return {"progress": progress, **empty}
    segments = load_segments(await store.get_blob(b.job_id, REPORT_BLOB))
    fold_open_segment(segments, await store.get_blob(b.job_id, OPEN_SEGMENT_BLOB))
    report = build_report(job, await store.counts(b.job_id), await store.totals(b.job_id), segments)
    providers = {
        name: {k: p.get(k, 0) for k in PROVIDER_FIGURES} for name, p in sorted(report["providers"].items())
    }
    usage = report["token_usage"]
    return {
        "progress": progress,
        "cost_usd": report["cost_usd"],
        "tokens": {"prompt": usage["prompt_tokens"], "completion": usage["completion_tokens"]},
        "providers": providers,
    }


def result_line(t: TaskRecord) -> bytes:
    """A finished item: its stored output line (batchgate's OUT line), or its error."""
    if t.output_line:
        return t.output_line
    error = {"code": "failed", "message": t.error or "failed"}
    return orjson.dumps({"custom_id": t.custom_id, "response": None, "error": error})
