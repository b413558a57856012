"""What the job API answers: the job object (state, options, request counts), the detail's
figures (progress and ETA from the store and the running engine, cost and tokens from the store's
totals, per-provider figures from the job's own items) and the lines of its results stream."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TypedDict

import orjson

from batchgate.config.job_spec import JobSpec
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.store.protocol import JobStore, TaskRecord, TaskState
from batchgate.server.job_api.job_table import state
from batchgate.server.tenancy.registry import BatchError, BatchRecord

FINISHED = (TaskState.SUCCEEDED, TaskState.FAILED)


class JobCounts(TypedDict):
    total: int
    succeeded: int
    failed: int
    pending: int  # not yet ended


class Validation(TypedDict):
    regex: str | None
    schema: Mapping[str, object] | None


class JobObject(TypedDict):
    """The job object every answer of the jobs API (and the dashboard's list) starts with."""

    id: str
    object: str  # "job"
    name: str | None
    state: str
    priority: str
    created_at: int
    not_before: str | None
    deadline: str | None
    mode: str | None
    budget: float | None
    callback_url: str | None
    metadata: Mapping[str, str]
    validate: Validation | None
    input_file_id: str | None
    request_counts: JobCounts
    errors: list[BatchError] | None
    times: dict[str, int]


class JobProgress(TypedDict):
    total: int
    succeeded: int
    failed: int
    pending: int
    rate_per_s: float | None  # while it runs here
    eta_s: float | None


class Tokens(TypedDict):
    prompt: int
    completion: int


class JobProviderFigures(TypedDict):
    succeeded: int
    failed: int
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class JobFigures(TypedDict):
    """A job's detail beside its object: progress, ETA, cost, tokens, each provider's share."""

    progress: JobProgress
    cost_usd: float
    tokens: Tokens
    providers: dict[str, JobProviderFigures]


def rfc3339(at: float | None) -> str | None:
    """`at` as an RFC 3339 date-time; a time no date-time can show (a row stored before times were
    range-checked) stays a number, so one old row never breaks a listing."""
    if at is None:
        return None
    try:
        return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(at)


def job_object(b: BatchRecord, spec: JobSpec, counts: JobCounts) -> JobObject:
    validate: Validation | None = None
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


async def job_counts(store: JobStore, b: BatchRecord, running: Progress | None = None) -> JobCounts:
    """total, succeeded, failed and pending (not yet ended) items: the `running` job's progress
    (`Batches.running`) while it runs here, else from the store."""
    if running is not None and running.before is not None:
        ok, failed = running.before.succeeded + running.succeeded, running.before.failed + running.failed
        return {
            "total": running.total,
            "succeeded": ok,
            "failed": failed,
            "pending": running.total - ok - failed,
        }
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


async def figures(
    store: JobStore, b: BatchRecord, engine: JobEngine | None, now: float, providers: ProviderFigures
) -> JobFigures:
    """The detail's progress, ETA, cost, tokens and per-provider figures, all of this job alone."""
    counts = await job_counts(store, b)
    progress: JobProgress = {**counts, "rate_per_s": None, "eta_s": None}
    if engine is not None:
        p = engine.progress
        done_now, elapsed = p.succeeded + p.failed, now - p.started
        if done_now and elapsed > 0:
            rate = done_now / elapsed
            progress["rate_per_s"] = round(rate, 3)
            progress["eta_s"] = round(counts["pending"] / rate, 1)
    if await store.get_job(b.job_id) is None:
        return {
            "progress": progress,
            "cost_usd": 0.0,
            "tokens": {"prompt": 0, "completion": 0},
            "providers": {},
        }
    totals = await store.totals(b.job_id)
    return {
        "progress": progress,
        "cost_usd": round(float(totals.get("cost_usd", 0.0)), 6),
        "tokens": {
            "prompt": int(totals.get("prompt_tokens", 0)),
            "completion": int(totals.get("completion_tokens", 0)),
        },
        "providers": await providers.of(store, b.job_id, counts["succeeded"] + counts["failed"]),
    }


class ProviderFigures:
    """Each provider's share of a job, from its finished items in the store (their OUT lines name
    the provider that answered), counting each item's attempts for that provider (the run
    report's figures count each attempt for the provider it went to: `provider_figures`).
    Kept per job until more of its items finish (a scan per change, not per request)."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[int, dict[str, JobProviderFigures]]] = {}

    async def of(self, store: JobStore, job_id: str, done: int) -> dict[str, JobProviderFigures]:
        known = self._known.get(job_id)
        if known is not None and known[0] == done:
            return known[1]
        found: dict[str, JobProviderFigures] = {}
        async for t in store.iter_results(job_id, ordered=False, states=FINISHED):
            parsed = orjson.loads(t.output_line) if t.output_line else None
            line: dict[str, object] = parsed if isinstance(parsed, dict) else {}
            p = found.setdefault(
                str(line.get("provider") or "none"),
                JobProviderFigures(
                    succeeded=0, failed=0, attempts=0, prompt_tokens=0, completion_tokens=0, cost_usd=0
                ),
            )
            if t.state is TaskState.SUCCEEDED:
                p["succeeded"] += 1
            else:
                p["failed"] += 1
            p["attempts"] += t.attempts
            usage = line.get("usage")
            if isinstance(usage, dict):  # an OUT line's usage: token counts the provider gave
                p["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
                p["completion_tokens"] += int(usage.get("completion_tokens") or 0)
            p["cost_usd"] = round(p["cost_usd"] + t.cost_usd, 6)
        self._known[job_id] = (done, found)
        return found


def result_line(t: TaskRecord) -> bytes:
    """A finished item: its stored output line (batchgate's OUT line), or its error."""
    if t.output_line:
        return t.output_line
    error = {"code": "failed", "message": t.error or "failed"}
    return orjson.dumps({"custom_id": t.custom_id, "response": None, "error": error})
