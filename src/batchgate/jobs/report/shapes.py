"""The report's documents, typed: a run segment as the job store keeps it (`Segment`, with its
per-provider figures, the shared gateway's state and batch mode's counters) and the report built
from a job's segments (`Report`, the JSON a run writes beside OUT, `batchgate report` prints and
`Job.report()` returns), and their one serializer each (`dump_segments` / `report_json`).

They are TypedDicts, not classes, because their JSON is a public shape that stays open: a report
gains `graph`, `cache`, `emulator` or `state` sections where a caller adds them, and a segment
stored by an older batchgate may lack a figure (every segment field is optional, read with a
default). Key order is the JSON's order: a document is written as a literal in that order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict

import orjson

from batchgate.config.job_spec import ShownSpec
from batchgate.jobs.cache.cached import CacheSection
from batchgate.jobs.progress.shapes import BatchCounters
from batchgate.jobs.store.options import SkippedLine


class Percentiles(TypedDict):
    p50: float
    p95: float
    p99: float


class ProviderFigures(TypedDict, total=False):
    """One provider's figures in one run segment (`provider_figures`); a provider answered only
    through batches has the cost keys alone."""

    request_count: int
    success_count: int
    error_count: int
    rate_limited: int
    retries: int
    retries_by_kind: dict[str, int]
    errors_by_kind: dict[str, int]
    avg_latency_ms: float
    latency_ms: Percentiles
    prompt_tokens: int
    completion_tokens: int
    wasted_tokens: int
    hedged: int
    duplicate_tokens: int
    unreachable_attempts: int
    unreachable_cause: str | None
    batch_cost_usd: float
    validation_tokens: int
    cost_usd: float
    latency_hist: dict[str, int]


class ProviderState(TypedDict):
    """What only a shared gateway knows of a provider, over every job it runs."""

    scope: str  # "gateway"
    circuit: str
    unreachable: bool
    paused: bool
    quota_used: dict[str, float]
    requests: int
    success_count: int
    error_count: int
    hedged: int
    duplicate_tokens: int


class Segment(TypedDict, total=False):
    """What one run contributed, as the job store keeps it (`build.run_segment`)."""

    run_id: str
    finished: bool
    elapsed_ms: int
    providers: dict[str, ProviderFigures]
    provider_state: dict[str, ProviderState]
    batches: BatchCounters
    retry_round: int  # the run that ended a --retry-failed round (its number)


class ReportProvider(TypedDict):
    """One provider's figures merged over a job's runs (`build.merge_segments`)."""

    request_count: int
    success_count: int
    error_count: int
    rate_limited: int
    retries: int
    prompt_tokens: int
    completion_tokens: int
    wasted_tokens: int
    hedged: int
    duplicate_tokens: int
    validation_tokens: int
    unreachable_attempts: int
    errors_by_kind: dict[str, int]
    retries_by_kind: dict[str, int]
    avg_latency_ms: float
    latency_ms: Percentiles
    cost_usd: float
    batch_cost_usd: float
    unreachable_cause: str | None
    live_cost_usd: float
    batch_items: NotRequired[int]
    batch_succeeded: NotRequired[int]
    batch_failed: NotRequired[int]
    batch_saving_usd: NotRequired[float]


class BatchProviderSection(TypedDict):
    items: int
    succeeded: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    live_cost_usd: float
    saving_usd: float


class BatchSection(TypedDict):
    """What batch mode did over every run (`build.batch_section`)."""

    submitted: int
    resumed: int
    ended: dict[str, int]
    creation_refused: int
    items_succeeded: int
    items_failed: int
    resubmitted_items: int
    sent_live_items: int
    cost_usd: float
    live_cost_usd: float
    saving_usd: float
    by_provider: dict[str, BatchProviderSection]


class InvalidOutput(TypedDict):
    """A task whose answer failed the output check, as the report lists it."""

    custom_id: str
    line: int
    problem: object  # the OUT line's error message
    metadata: NotRequired[dict[str, object]]


class TokenUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    retry_extra_tokens: int
    hedge_duplicate_tokens: int


class CostSplit(TypedDict):
    live_usd: float
    batch_usd: float
    all_live_usd: float
    batch_saving_usd: float


class Report(TypedDict):
    """The job report (`build.build_report`), with the sections its callers add (a fan-out or
    pipeline's `graph`: `finish.JobReport`)."""

    batch_id: str
    job: ShownSpec
    status: str
    stop_reason: str | None
    input: str
    output: str
    task_total: int
    success_count: int
    failed_count: int
    pending_count: int
    invalid_count: int
    invalid_outputs: list[InvalidOutput]
    total_elapsed_ms: int
    runs: int
    retry_rounds: int
    providers: dict[str, ReportProvider]
    errors_by_kind: dict[str, int]
    unreachable: list[str]
    skipped_invalid_lines: int
    prices: dict[str, str]
    skipped_lines: list[SkippedLine]
    errors_file: str | None
    rate_limited: int
    retries: int
    retries_by_cause: dict[str, int]
    token_usage: TokenUsage
    cost_usd: float
    cost_split: CostSplit
    batches: BatchSection
    provider_state: NotRequired[dict[str, ProviderState]]  # a server job's (shared gateway)
    cache: NotRequired[CacheSection]  # answers from the response cache (issue 43)
    emulator: NotRequired[Mapping[str, object]]  # the embedded emulator's figures, series left out
    state: NotRequired[str]  # `batchgate report`'s and the job page's: the job's state now


def report_json(report: Report) -> bytes:
    """The report's one serializer: the report file, `batchgate report`, the report page."""
    return orjson.dumps(report, option=orjson.OPT_INDENT_2)


def segment_json(segment: Segment) -> bytes:
    """A segment's one serializer: the running run's, kept apart until it ends."""
    return orjson.dumps(segment)


def dump_segments(segments: list[Segment]) -> bytes:
    """The segments' serializer, as the job store keeps a job's ended runs."""
    return orjson.dumps({"segments": segments})


def load_segments(blob: bytes | None) -> list[Segment]:
    """The stored segments (none for an empty or foreign blob)."""
    if not blob:
        return []
    data = orjson.loads(blob)
    return list(data.get("segments", [])) if isinstance(data, dict) else []
