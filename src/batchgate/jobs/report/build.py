"""The job report: a JSON account of what happened per provider (requests, errors by kind, 429s,
retries, latency percentiles, tokens, cost split live / Batch API), what batch mode did (batches
submitted, resumed, ended by state, items resubmitted or sent live, the saving against all-live),
merged across the runs of a resumed job (its table for the terminal is `summary`; the documents'
types are `shapes`).

The per-provider figures are always the job's own: from the gateway's counters where the run owns
its gateway (the CLI), from the job's tallies of its results' attempts where a server's gateway is
shared by every job (`provider_figures`); there, what only the gateway knows (circuit, quota in
use, its totals over all jobs, hedges) is apart, under `provider_state` (`"scope": "gateway"`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, cast

import orjson

from batchgate.jobs.progress.counters import MAX_LISTED_INVALID, Progress
from batchgate.jobs.report.batch_figures import merge_batch_stats
from batchgate.jobs.report.provider_figures import (
    by_kind,
    gateway_providers,
    hist_percentiles,
    own_providers,
    shared_state,
)
from batchgate.jobs.report.shapes import (
    BatchProviderSection,
    BatchSection,
    InvalidOutput,
    Percentiles,
    ProviderFigures,
    ProviderState,
    Report,
    ReportProvider,
    Segment,
)
from batchgate.jobs.store.protocol import JobRecord, JobStore, TaskState
from batchgate.request_fields import out_line_metadata
from batchgate.stats import GatewayStatistics
from batchgate.text import plural

REPORT_BLOB = "report"
OPEN_SEGMENT_BLOB = "report.open"  # the running run's figures, refreshed every few seconds
INVALID_CODE = "invalid_output"

_ADDITIVE = (
    "request_count",
    "success_count",
    "error_count",
    "rate_limited",
    "retries",
    "prompt_tokens",
    "completion_tokens",
    "wasted_tokens",
    "hedged",
    "duplicate_tokens",
    "validation_tokens",
    "unreachable_attempts",
)


def run_segment(
    stats: GatewayStatistics,
    elapsed_s: float,
    progress: Progress,
    *,
    run_id: str,
    finished: bool = True,
) -> Segment:
    """What one run (one process, from start or resume to stop) contributes to the report.

    A run killed before it finished leaves its last periodic segment (`finished` False) behind;
    the next run folds it in (`fold_open_segment`), so a crash loses at most a few seconds of figures.
    With a gateway other jobs share (`progress.shared_gateway`, a server): the job's own figures,
    and the gateway's state apart (`provider_state`).
    """
    shared = progress.shared_gateway
    providers = own_providers(progress) if shared else gateway_providers(stats, progress)
    segment: Segment = {
        "run_id": run_id,
        "finished": finished,
        "elapsed_ms": round(elapsed_s * 1000.0),
        "providers": providers,
    }
    if shared:
        segment["provider_state"] = shared_state(stats)
    batches = progress.batches().get("stats")
    if batches:
        segment["batches"] = batches
    return segment


@dataclass(slots=True)
class _Merging:
    """One provider's figures being summed over a job's segments."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_ADDITIVE, 0))
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    retries_by_kind: dict[str, int] = field(default_factory=dict)
    latency_ms: Percentiles = field(default_factory=lambda: Percentiles(p50=0.0, p95=0.0, p99=0.0))
    latency_hist: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    batch_cost_usd: float = 0.0
    unreachable_cause: str | None = None
    runs: int = 0  # runs that answered something
    latency_sum: float = 0.0  # each run's average latency times its answered attempts

    def add(self, p: ProviderFigures) -> None:
        figures: Mapping[str, object] = p
        for k in _ADDITIVE:
            self.counts[k] += int(cast("int", figures.get(k, 0)))
        self.cost_usd = round(self.cost_usd + float(p.get("cost_usd", 0.0)), 6)
        self.batch_cost_usd = round(self.batch_cost_usd + float(p.get("batch_cost_usd", 0.0)), 6)
        for into, by in (
            (self.errors_by_kind, p.get("errors_by_kind", {})),
            (self.retries_by_kind, p.get("retries_by_kind", {})),
        ):
            for kind, n in by.items():
                into[kind] = into.get(kind, 0) + int(n)
        self.unreachable_cause = p.get("unreachable_cause") or self.unreachable_cause
        answered = int(p.get("success_count", 0)) + int(p.get("error_count", 0))
        if not answered:
            return
        self.runs += 1
        self.latency_sum += float(p.get("avg_latency_ms", 0.0)) * answered
        self.latency_ms = cast("Percentiles", dict(p.get("latency_ms", self.latency_ms)))
        for key, n in p.get("latency_hist", {}).items():
            self.latency_hist[key] = self.latency_hist.get(key, 0) + int(n)

    def figures(self) -> ReportProvider:
        c = self.counts
        answered = c["success_count"] + c["error_count"]
        multi = self.runs > 1 and self.latency_hist
        return {
            "request_count": c["request_count"],
            "success_count": c["success_count"],
            "error_count": c["error_count"],
            "rate_limited": c["rate_limited"],
            "retries": c["retries"],
            "prompt_tokens": c["prompt_tokens"],
            "completion_tokens": c["completion_tokens"],
            "wasted_tokens": c["wasted_tokens"],
            "hedged": c["hedged"],
            "duplicate_tokens": c["duplicate_tokens"],
            "validation_tokens": c["validation_tokens"],
            "unreachable_attempts": c["unreachable_attempts"],
            "errors_by_kind": self.errors_by_kind,
            "retries_by_kind": self.retries_by_kind,
            "avg_latency_ms": round(self.latency_sum / answered, 1) if answered else 0.0,
            "latency_ms": hist_percentiles(self.latency_hist) if multi else self.latency_ms,
            "cost_usd": self.cost_usd,
            "batch_cost_usd": self.batch_cost_usd,
            "unreachable_cause": self.unreachable_cause,
            "live_cost_usd": round(self.cost_usd - self.batch_cost_usd, 6),
        }


def merge_segments(segments: list[Segment]) -> tuple[int, dict[str, ReportProvider]]:
    """Sum counters over runs. The average latency is weighted by each run's answered attempts;
    percentiles are exact for a provider seen in one run, else read from the merged histograms."""
    elapsed = 0
    merged: dict[str, _Merging] = {}
    for seg in segments:
        elapsed += int(seg.get("elapsed_ms", 0))
        for name, p in seg.get("providers", {}).items():
            merged.setdefault(name, _Merging()).add(p)
    return elapsed, {name: m.figures() for name, m in merged.items()}


RETRY_ROUND: Final = "retry_round"  # on a run segment: the run that ended a --retry-failed round (its number)


def build_report(
    job: JobRecord,
    counts: dict[TaskState, int],
    totals: dict[str, float],
    segments: list[Segment],
    *,
    invalid: tuple[int, list[InvalidOutput]] = (0, []),
) -> Report:
    elapsed, providers = merge_segments(segments)
    batches = batch_section(segments)
    _add_batch_items(providers, batches["by_provider"])
    report: Report = {
        "batch_id": job.job_id,
        "job": job.options.spec.shown(),  # name, priority, metadata, schedule (`config.job_spec`)
        "status": job.status,
        "stop_reason": job.stop_reason,
        "input": job.input_path,
        "output": job.output_path,
        "task_total": job.task_total,
        "success_count": counts.get(TaskState.SUCCEEDED, 0),
        "failed_count": counts.get(TaskState.FAILED, 0),
        "pending_count": counts.get(TaskState.PENDING, 0) + counts.get(TaskState.RUNNING, 0),
        "invalid_count": invalid[0],
        "invalid_outputs": invalid[1],
        "total_elapsed_ms": elapsed,
        "runs": len(segments),
        "retry_rounds": sum(1 for seg in segments if seg.get(RETRY_ROUND)),  # see job_setup.run_in_rounds
        "providers": providers,
        "errors_by_kind": by_kind(providers, "errors_by_kind"),
        "unreachable": unreachable_lines(providers),
        "skipped_invalid_lines": job.options.skipped_lines,
        "prices": dict(job.options.price_notes),  # model → where its price came from
        "skipped_lines": [p.copy() for p in job.options.skipped_first],  # the first; all in the errors file
        "errors_file": job.options.errors_path,
        "rate_limited": sum(p["rate_limited"] for p in providers.values()),
        "retries": sum(p["retries"] for p in providers.values()),
        "retries_by_cause": by_kind(providers, "retries_by_kind"),  # an answer no retry reads: 1 each
        "token_usage": {
            "prompt_tokens": int(totals.get("prompt_tokens", 0)),
            "completion_tokens": int(totals.get("completion_tokens", 0)),
            "retry_extra_tokens": sum(
                p["wasted_tokens"] + p["validation_tokens"] for p in providers.values()
            ),
            "hedge_duplicate_tokens": sum(p.get("duplicate_tokens", 0) for p in providers.values()),
        },
        "cost_usd": round(float(totals.get("cost_usd", 0.0)), 6),
        "cost_split": {
            "live_usd": round(sum(p["live_cost_usd"] for p in providers.values()), 6),
            "batch_usd": batches["cost_usd"],
            "all_live_usd": round(
                sum(p["live_cost_usd"] for p in providers.values()) + batches["live_cost_usd"], 6
            ),
            "batch_saving_usd": batches["saving_usd"],
        },
        "batches": batches,
    }
    if (state := _provider_state(segments)) is not None:
        report["provider_state"] = state
    return report


def _provider_state(segments: list[Segment]) -> dict[str, ProviderState] | None:
    """A server job's `provider_state`: the shared gateway's, as its latest run last saw it."""
    for seg in reversed(segments):
        if state := seg.get("provider_state"):
            return state
    return None


def _add_batch_items(
    providers: dict[str, ReportProvider], by_provider: dict[str, BatchProviderSection]
) -> None:
    """Count what each provider answered through its Batch API beside its live requests: the
    items (`batch_items`, `batch_succeeded`, `batch_failed`, and in its `request_count`,
    `success_count` and `error_count`), their tokens in the provider's `prompt_tokens` /
    `completion_tokens`, and the saving."""
    for name, b in by_provider.items():
        p = providers.setdefault(name, _Merging().figures())
        p["batch_items"] = b["items"]
        p["batch_succeeded"] = b["succeeded"]
        p["batch_failed"] = b["failed"]
        p["request_count"] += b["items"]
        p["success_count"] += b["succeeded"]
        p["error_count"] += b["failed"]
        p["prompt_tokens"] += b["prompt_tokens"]
        p["completion_tokens"] += b["completion_tokens"]
    for name, p in providers.items():
        b_of = by_provider.get(name)
        p["batch_saving_usd"] = round(b_of["saving_usd"] if b_of is not None else 0.0, 6)


def unreachable_lines(providers: Mapping[str, ReportProvider]) -> list[str]:
    """`alpha unreachable: connection refused, 24 attempts` for each provider that could not be
    reached at some point."""
    return [
        f"{name} unreachable: {p.get('unreachable_cause') or 'unreachable'}, "
        f"{plural(int(p['unreachable_attempts']), 'attempt')}"
        for name, p in sorted(providers.items())
        if p.get("unreachable_attempts")
    ]


def batch_section(segments: list[Segment]) -> BatchSection:
    """What batch mode did over every run: batches submitted, resumed (after a restart), ended by
    provider state, refused at creation; items answered, put into a new batch, or sent live; their
    cost at the Batch API price, what they would have cost live, and the saving."""
    merged = merge_batch_stats(b for seg in segments if (b := seg.get("batches")))
    by_provider: dict[str, BatchProviderSection] = {
        name: {
            "items": int(p.get("items", 0)),
            "succeeded": int(p.get("succeeded", 0)),
            "failed": int(p.get("failed", 0)),
            "prompt_tokens": int(p.get("prompt_tokens", 0)),
            "completion_tokens": int(p.get("completion_tokens", 0)),
            "cost_usd": round(float(p.get("cost_usd", 0.0)), 6),
            "live_cost_usd": round(float(p.get("live_cost_usd", 0.0)), 6),
            "saving_usd": round(float(p.get("live_cost_usd", 0.0)) - float(p.get("cost_usd", 0.0)), 6),
        }
        for name, p in sorted(merged.get("by_provider", {}).items())
    }
    return {
        "submitted": int(merged["batches_submitted"]),
        "resumed": int(merged["batches_resumed"]),
        "ended": {k: int(v) for k, v in sorted(merged["batches_ended"].items())},
        "creation_refused": int(merged["creation_refused"]),
        "items_succeeded": int(merged["succeeded"]),
        "items_failed": int(merged["failed"]),
        "resubmitted_items": int(merged["resubmitted"]),
        "sent_live_items": int(merged["sent_live"]),
        "cost_usd": merged["cost_usd"],
        "live_cost_usd": merged["live_cost_usd"],
        "saving_usd": merged["saving_usd"],
        "by_provider": by_provider,
    }


async def load_invalid(
    store: JobStore, job_id: str, limit: int = MAX_LISTED_INVALID
) -> tuple[int, list[InvalidOutput]]:
    """How many tasks' answers failed the output check, and the first `limit` of them (custom_id,
    input line, problem) — read from the store, so a crash loses none."""
    count = 0
    found: list[InvalidOutput] = []
    async for record in store.iter_results(job_id, ordered=True, states=[TaskState.FAILED]):
        error, meta = _line_error(record.output_line)
        if error.get("code") != INVALID_CODE:
            continue
        count += 1
        if len(found) < limit:
            item: InvalidOutput = {
                "custom_id": record.custom_id,
                "line": record.line_no,
                "problem": error.get("message"),
            }
            if meta:
                item["metadata"] = meta  # the input line's metadata, as its OUT line has it
            found.append(item)
    return count, found


def _line_error(line: bytes | None) -> tuple[dict[str, object], dict[str, object]]:
    """An OUT line's `error` object and the task metadata it carries."""
    if not line:
        return {}, {}
    try:
        parsed = orjson.loads(line)
    except orjson.JSONDecodeError:
        return {}, {}
    if not isinstance(parsed, dict):
        return {}, {}
    error = parsed.get("error")
    return (error if isinstance(error, dict) else {}), out_line_metadata(parsed)


def fold_open_segment(segments: list[Segment], open_blob: bytes | None) -> bool:
    """Add the periodic segment a killed run left behind, unless that run already finished.
    Returns True when `segments` changed."""
    if not open_blob:
        return False
    seg = orjson.loads(open_blob)
    if not isinstance(seg, dict) or not seg.get("run_id"):
        return False
    if any(s.get("run_id") == seg["run_id"] for s in segments):
        return False
    segments.append(cast("Segment", seg))  # as the run wrote it (`run_segment`)
    return True
