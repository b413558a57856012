"""What a job's page shows, read from the job store: its figures, its report (`stored_report`),
its timeline (the samples its runs stored) and its failures (how many of each kind, and the first
ones with their custom_id, one-line error and input-line metadata). The dashboard's job page and
`report --html` show the same data."""

from __future__ import annotations

import contextlib
from typing import NotRequired, TypedDict

import orjson

from batchgate.jobs.finish import JobReport, stored_report
from batchgate.jobs.progress.timeline import TIMELINE_BLOB, TimelineData, load_timeline
from batchgate.jobs.store.protocol import JobRecord, JobStore, TaskState
from batchgate.request_fields import out_line_metadata

FIRST_FAILURES = 20
COUNTED_FAILURES = 10_000  # failures read to count kinds (a huge failed job: the first ones)


class Failure(TypedDict):
    custom_id: str
    code: str
    message: str
    attempts: int
    metadata: NotRequired[dict[str, object]]  # the input line's, as its OUT line carries it


class Failures(TypedDict):
    by_kind: dict[str, int]
    first: list[Failure]
    counted: int


class PageData(TypedDict):
    """Everything a job page draws (the dashboard's, and `report --html`'s embedded JSON)."""

    job: str
    state: str
    report: JobReport
    timeline: TimelineData
    failures: Failures


async def failures(store: JobStore, job_id: str) -> Failures:
    """`by_kind`: failed items per error code; `first`: the first failures in input order."""
    by_kind: dict[str, int] = {}
    first: list[Failure] = []
    seen = 0
    async for t in store.iter_results(job_id, ordered=True, states=(TaskState.FAILED,)):
        code, _, message = (t.error or "error").partition(": ")
        by_kind[code] = by_kind.get(code, 0) + 1
        if len(first) < FIRST_FAILURES:
            item: Failure = {
                "custom_id": t.custom_id,
                "code": code,
                "message": message,
                "attempts": t.attempts,
            }
            if meta := _metadata(t.output_line):
                item["metadata"] = meta
            first.append(item)
        seen += 1
        if seen >= COUNTED_FAILURES:
            break
    return {"by_kind": dict(sorted(by_kind.items())), "first": first, "counted": seen}


def _metadata(line: bytes | None) -> dict[str, object]:
    """The input line's metadata its OUT line carries ({} when none)."""
    with contextlib.suppress(orjson.JSONDecodeError):
        parsed = orjson.loads(line or b"null")
        return out_line_metadata(parsed) if isinstance(parsed, dict) else {}
    return {}


async def page_data(store: JobStore, job: JobRecord, state: str) -> PageData:
    """Everything a job page draws, as one JSON-able object."""
    report = await stored_report(store, job)
    report["state"] = state
    return {
        "job": job.job_id,
        "state": state,
        "report": report,
        "timeline": load_timeline(await store.get_blob(job.job_id, TIMELINE_BLOB)),
        "failures": await failures(store, job.job_id),
    }
