"""The end of a run (or of `batchgate cancel`): the job's status and report figures stored, then
OUT, the errors file and the JSON report written from the store — so each custom_id appears in
OUT exactly once, whichever runs and batches produced it; and the rounds of `--retry-failed [N]` /
`batchgate retry` (`run_in_rounds`): a job's failed tasks re-queued and run again, at most N
rounds, each re-running those that failed again; each round's last run segment is marked, so the
report counts the rounds a job has had over all its runs."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, Protocol, TypeVar, cast

import orjson

from batchgate.jobs.cache.cached import JobCache, cache_section
from batchgate.jobs.graph.expand import GraphTasks
from batchgate.jobs.graph.output import GraphSection, write_joined
from batchgate.jobs.output.files import write_outputs
from batchgate.jobs.report.build import (
    OPEN_SEGMENT_BLOB,
    REPORT_BLOB,
    RETRY_ROUND,
    build_report,
    fold_open_segment,
    load_invalid,
)
from batchgate.jobs.report.shapes import Report, Segment, dump_segments, load_segments, report_json
from batchgate.jobs.store.protocol import JobRecord, JobStore, TaskState
from batchgate.text import plural

GRAPH_REPORT_BLOB = "graph_report"  # a fan-out or pipeline job's step comparison, as last written


@dataclass(frozen=True, slots=True)
class OutputFiles:
    output: Path
    errors: Path
    ordered: bool = False

    @property
    def report(self) -> Path:
        return self.output.with_name(self.output.name + ".report.json")

    @classmethod
    def of_job(cls, job: JobRecord) -> OutputFiles:
        """The files a job writes, as it recorded them when it was created."""
        output = Path(job.output_path)
        errors = job.options.errors_path
        return cls(
            output,
            Path(errors) if errors else output.with_name(output.name + ".errors.jsonl"),
            job.options.ordered,
        )

    def as_dict(self) -> dict[str, str]:
        return {"output": str(self.output), "errors": str(self.errors), "report": str(self.report)}


class JobReport(Report):
    """The report as a run writes it and `batchgate report` shows it: `build_report`'s, with a
    fan-out or pipeline's `graph` section (the step comparison)."""

    graph: NotRequired[GraphSection]


@dataclass(frozen=True, slots=True)
class Finished:
    status: str  # completed | stopped
    reason: str | None
    unfinished: int
    written: int
    failed: int
    report: JobReport


async def finish_job(
    store: JobStore,
    job_id: str,
    files: OutputFiles,
    segments: list[Segment],
    *,
    stop_reason: str | None,
    emulator_stats: Mapping[str, object] | None = None,
    graph: GraphTasks | None = None,
    appended: int | None = None,
    more_input: bool = False,
    cache: JobCache | None = None,
) -> Finished:
    """Store the job's status and report segments, then write OUT, errors and the report. A
    fan-out or pipeline job (`graph`) writes one joined line per input and a `graph` report section.
    `appended`: the lines a run appended to OUT as it went; when that is one per finished task, OUT
    is complete and is left as it is (else, and for `--ordered`, it is rewritten from the store).
    `more_input`: the job's input is not all stored yet, so the job is stopped, not completed."""
    counts = await store.counts(job_id)
    unfinished = counts[TaskState.PENDING] + counts[TaskState.RUNNING]
    status = "completed" if unfinished == 0 and not more_input else "stopped"
    reason = None if status == "completed" else (stop_reason or "unfinished")
    # A pipeline's later tasks are added as they become ready: its total is what the store holds.
    total = sum(counts.values()) if graph is not None else None
    # "" clears an old stop
    await store.update_job(job_id, status=status, stop_reason=reason or "", task_total=total)
    await store.put_blob(job_id, REPORT_BLOB, dump_segments(segments))
    await store.put_blob(job_id, OPEN_SEGMENT_BLOB, b"")
    section: GraphSection | None = None
    if graph is not None:
        written, failed, section = await write_joined(store, job_id, graph, files.output, files.errors)
    else:
        whole = appended == counts[TaskState.SUCCEEDED] + counts[TaskState.FAILED] and not files.ordered
        out = None if whole else files.output
        written, failed = await write_outputs(store, job_id, out, files.errors, ordered=files.ordered)
        written = appended if whole and appended is not None else written
    job_now = await store.get_job(job_id)
    assert job_now is not None
    invalid = await load_invalid(store, job_id)
    built = build_report(job_now, counts, await store.totals(job_id), segments, invalid=invalid)
    report = cast("JobReport", built)  # no graph section yet
    if section is not None:
        report["graph"] = section
        await store.put_blob(job_id, GRAPH_REPORT_BLOB, orjson.dumps(section))
    if (cached := await cache_section(store, job_id, cache)) is not None:
        report["cache"] = cached  # answers from the response cache, what they saved (issue 43)
    if emulator_stats is not None:
        report["emulator"] = _without_series(emulator_stats)
    write_report(files.report, report)
    return Finished(status, reason, unfinished, written, failed, report)


async def earlier_segments(store: JobStore, job_id: str) -> list[Segment]:
    """The report segments of earlier runs, with the figures of a run that was killed folded in."""
    segments = load_segments(await store.get_blob(job_id, REPORT_BLOB))
    if fold_open_segment(segments, await store.get_blob(job_id, OPEN_SEGMENT_BLOB)):
        await store.put_blob(job_id, REPORT_BLOB, dump_segments(segments))
    await store.put_blob(job_id, OPEN_SEGMENT_BLOB, b"")
    return segments


def refused_tokens(segments: list[Segment]) -> int:
    """Tokens earlier runs were billed for answers the output check refused (not in the store)."""
    return sum(
        int(p.get("validation_tokens", 0)) for seg in segments for p in seg.get("providers", {}).values()
    )


def _without_series(stats: Mapping[str, object]) -> dict[str, object]:
    """The embedded emulator's figures for the report: each provider's time series left out."""
    given = stats.get("providers")
    providers = {
        name: {k: v for k, v in p.items() if k != "series"}
        for name, p in (given.items() if isinstance(given, Mapping) else ())
        if isinstance(p, Mapping)
    }
    return {**stats, "providers": providers}


def write_report(path: Path, report: JobReport) -> None:
    """Write the JSON report atomically (owner-only)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(report_json(report))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


async def stored_report(store: JobStore, job: JobRecord) -> JobReport:
    """The job's report as the store has it now: a run going on, or killed, has left its figures
    so far (read and folded in, never written back)."""
    segments = load_segments(await store.get_blob(job.job_id, REPORT_BLOB))
    fold_open_segment(segments, await store.get_blob(job.job_id, OPEN_SEGMENT_BLOB))
    built = build_report(
        job,
        await store.counts(job.job_id),
        await store.totals(job.job_id),
        segments,
        invalid=await load_invalid(store, job.job_id),
    )
    report = cast("JobReport", built)  # no graph section yet
    graph = await store.get_blob(job.job_id, GRAPH_REPORT_BLOB)
    if graph:
        report["graph"] = cast("GraphSection", orjson.loads(graph))  # as `finish_job` stored it
    if (cached := await cache_section(store, job.job_id, None)) is not None:
        report["cache"] = cached
    return report


# -- --retry-failed rounds ----------------------------------------------------------------------


class _Outcome(Protocol):
    @property
    def status(self) -> str: ...


_O = TypeVar("_O", bound=_Outcome)
_G = TypeVar("_G")


async def run_in_rounds(
    store: JobStore,
    job_id: str,
    rounds: int,
    run: Callable[[], Awaitable[tuple[_O, _G]]],
    segments: list[Segment],
    say: Callable[[str], None],
) -> tuple[_O, _G]:
    """Run the job (`run`), with up to `rounds` rounds of its failed tasks re-queued first."""
    done = 0
    if rounds:
        done = 1
        say(f"re-queued {plural(await store.requeue_failed(job_id), 'failed item')} of job {job_id}")
    outcome, extra = await run()
    _mark(segments, done)
    while done < rounds and outcome.status == "completed":
        requeued = await store.requeue_failed(job_id)
        if not requeued:
            break
        done += 1
        say(f"round {done} of {rounds}: re-queued {plural(requeued, 'item')} that failed again")
        outcome, extra = await run()
        _mark(segments, done)
    return outcome, extra


def _mark(segments: list[Segment], round_no: int) -> None:
    if round_no and segments:
        segments[-1][RETRY_ROUND] = round_no
