"""The job report: a JSON account of what happened per provider (requests, errors by kind, 429s,
retries, latency percentiles, tokens, cost split live / Batch API), what batch mode did (batches
submitted, resumed, ended by state, items resubmitted or sent live, the saving against all-live),
merged across the runs of a resumed job, and a readable summary table for the terminal.

The per-provider figures are always the job's own: from the gateway's counters where the run owns
its gateway (the CLI), from the job's tallies of its results' attempts where a server's gateway is
shared by every job (`provider_figures`); there, what only the gateway knows (circuit, quota in
use, its totals over all jobs, hedges) is apart, under `provider_state` (`"scope": "gateway"`)."""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.config.job_spec import spec_line
from batchgate.jobs.cache.cached import cache_lines
from batchgate.jobs.progress.counters import MAX_LISTED_INVALID, Progress
from batchgate.jobs.report.batch_figures import merge_batch_stats
from batchgate.jobs.report.provider_figures import (
    by_kind,
    gateway_providers,
    hist_percentiles,
    own_providers,
    shared_state,
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
) -> dict[str, Any]:
    """What one run (one process, from start or resume to stop) contributes to the report.

    A run killed before it finished leaves its last periodic segment (`finished` False) behind;
    the next run folds it in (`fold_open_segment`), so a crash loses at most a few seconds of figures.
    With a gateway other jobs share (`progress.shared_gateway`, a server): the job's own figures,
    and the gateway's state apart (`provider_state`).
    """
    shared = progress.shared_gateway
    providers = own_providers(progress) if shared else gateway_providers(stats, progress)
    segment: dict[str, Any] = {
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


def _empty_provider() -> dict[str, Any]:
    return dict.fromkeys(_ADDITIVE, 0) | {
        "errors_by_kind": {},
        "retries_by_kind": {},
        "avg_latency_ms": 0.0,
        "latency_ms": {"p50": 0.0, "p95": 0.0, "p99": 0.0},
        "latency_hist": {},
        "cost_usd": 0.0,
        "batch_cost_usd": 0.0,
        "unreachable_cause": None,
        "_runs": 0,
        "_latency_sum": 0.0,
    }


def merge_segments(segments: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """Sum counters over runs. The average latency is weighted by each run's answered attempts;
    percentiles are exact for a provider seen in one run, else read from the merged histograms."""
    elapsed = 0
    merged: dict[str, dict[str, Any]] = {}
    for seg in segments:
        elapsed += int(seg.get("elapsed_ms", 0))
        for name, p in seg.get("providers", {}).items():
            into = merged.setdefault(name, _empty_provider())
            for k in _ADDITIVE:
                into[k] += int(p.get(k, 0))
            into["cost_usd"] = round(into["cost_usd"] + float(p.get("cost_usd", 0.0)), 6)
            into["batch_cost_usd"] = round(into["batch_cost_usd"] + float(p.get("batch_cost_usd", 0.0)), 6)
            for key in ("errors_by_kind", "retries_by_kind"):
                for kind, n in p.get(key, {}).items():
                    into[key][kind] = into[key].get(kind, 0) + int(n)
            into["unreachable_cause"] = p.get("unreachable_cause") or into["unreachable_cause"]
            answered = int(p.get("success_count", 0)) + int(p.get("error_count", 0))
            if not answered:
                continue
            into["_runs"] += 1
            into["_latency_sum"] += float(p.get("avg_latency_ms", 0.0)) * answered
            into["latency_ms"] = dict(p.get("latency_ms", into["latency_ms"]))
            for key, n in p.get("latency_hist", {}).items():
                into["latency_hist"][key] = into["latency_hist"].get(key, 0) + int(n)
    for into in merged.values():
        into["live_cost_usd"] = round(into["cost_usd"] - into["batch_cost_usd"], 6)
        answered = into["success_count"] + into["error_count"]
        latency_sum = into.pop("_latency_sum")
        into["avg_latency_ms"] = round(latency_sum / answered, 1) if answered else 0.0
        if into.pop("_runs") > 1 and into["latency_hist"]:
            into["latency_ms"] = hist_percentiles(into["latency_hist"])
        del into["latency_hist"]
    return elapsed, merged


RETRY_ROUND = "retry_round"  # on a run segment: the run that ended a --retry-failed round (its number)


def build_report(
    job: JobRecord,
    counts: dict[TaskState, int],
    totals: dict[str, float],
    segments: list[dict[str, Any]],
    *,
    invalid: tuple[int, list[dict[str, Any]]] = (0, []),
) -> dict[str, Any]:
    elapsed, providers = merge_segments(segments)
    batches = batch_section(segments)
    _add_batch_items(providers, batches["by_provider"])
    return {
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
        "skipped_lines": [dict(p) for p in job.options.skipped_first],  # the first; all in the errors file
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
    } | _provider_state(segments)


def _provider_state(segments: list[dict[str, Any]]) -> dict[str, Any]:
    """A server job's `provider_state`: the shared gateway's, as its latest run last saw it."""
    for seg in reversed(segments):
        if seg.get("provider_state"):
            return {"provider_state": seg["provider_state"]}
    return {}


def _add_batch_items(providers: dict[str, Any], by_provider: dict[str, Any]) -> None:
    """Count what each provider answered through its Batch API beside its live requests: the
    items (`batch_items`, `batch_succeeded`, `batch_failed`, and in its `request_count`,
    `success_count` and `error_count`), their tokens in the provider's `prompt_tokens` /
    `completion_tokens`, and the saving."""
    for name, b in by_provider.items():
        p = providers.setdefault(name, merge_segments([{"providers": {name: {}}}])[1][name])
        p["batch_items"] = b["items"]
        p["batch_succeeded"] = b["succeeded"]
        p["batch_failed"] = b["failed"]
        p["request_count"] += b["items"]
        p["success_count"] += b["succeeded"]
        p["error_count"] += b["failed"]
        p["prompt_tokens"] += b["prompt_tokens"]
        p["completion_tokens"] += b["completion_tokens"]
    for name, p in providers.items():
        p["batch_saving_usd"] = round(by_provider.get(name, {}).get("saving_usd", 0.0), 6)


def unreachable_lines(providers: dict[str, Any]) -> list[str]:
    """`alpha unreachable: connection refused, 24 attempts` for each provider that could not be
    reached at some point."""
    return [
        f"{name} unreachable: {p.get('unreachable_cause') or 'unreachable'}, "
        f"{plural(int(p['unreachable_attempts']), 'attempt')}"
        for name, p in sorted(providers.items())
        if p.get("unreachable_attempts")
    ]


def batch_section(segments: list[dict[str, Any]]) -> dict[str, Any]:
    """What batch mode did over every run: batches submitted, resumed (after a restart), ended by
    provider state, refused at creation; items answered, put into a new batch, or sent live; their
    cost at the Batch API price, what they would have cost live, and the saving."""
    merged = merge_batch_stats(seg["batches"] for seg in segments if seg.get("batches"))
    by_provider = {
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
) -> tuple[int, list[dict[str, Any]]]:
    """How many tasks' answers failed the output check, and the first `limit` of them (custom_id,
    input line, problem) — read from the store, so a crash loses none."""
    count = 0
    found: list[dict[str, Any]] = []
    async for record in store.iter_results(job_id, ordered=True, states=[TaskState.FAILED]):
        error, meta = _line_error(record.output_line)
        if error.get("code") != INVALID_CODE:
            continue
        count += 1
        if len(found) < limit:
            found.append(
                {"custom_id": record.custom_id, "line": record.line_no, "problem": error.get("message")}
                | ({"metadata": meta} if meta else {})  # the input line's metadata, as its OUT line has it
            )
    return count, found


def _line_error(line: bytes | None) -> tuple[dict[str, Any], dict[str, Any]]:
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


def load_segments(blob: bytes | None) -> list[dict[str, Any]]:
    if not blob:
        return []
    data = orjson.loads(blob)
    return list(data.get("segments", [])) if isinstance(data, dict) else []


def dump_segments(segments: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"segments": segments})


def fold_open_segment(segments: list[dict[str, Any]], open_blob: bytes | None) -> bool:
    """Add the periodic segment a killed run left behind, unless that run already finished.
    Returns True when `segments` changed."""
    if not open_blob:
        return False
    seg = orjson.loads(open_blob)
    if not isinstance(seg, dict) or not seg.get("run_id"):
        return False
    if any(s.get("run_id") == seg["run_id"] for s in segments):
        return False
    segments.append(seg)
    return True


def render_summary(report: dict[str, Any]) -> str:
    """A plain-text table (no colour codes) for the end of a run and `batchgate report`."""
    lines = [
        f"job {report['batch_id']}{spec_line(report.get('job') or {})}: {report['status']}"
        + (f" ({report['stop_reason']})" if report.get("stop_reason") else ""),
        f"  {report['success_count']} succeeded, {report['failed_count']} failed, "
        f"{report['pending_count']} pending of {report['task_total']}  ·  "
        f"{report['total_elapsed_ms'] / 1000:.1f} s  ·  ${report['cost_usd']:.4f}  ·  "
        f"{report['rate_limited']} x 429, {report['retries']} retries",
    ]
    batches = report.get("batches") or {}
    batched = bool(batches.get("submitted") or batches.get("resumed"))
    w = max([12, *(len(n) + 2 for n in report["providers"])])  # a per-model quota: `entry/model`
    header = (
        f"  {'provider':<{w}}{'requests':>9}{'ok':>8}{'errors':>8}{'429s':>6}{'p50 ms':>9}"
        f"{'p95 ms':>9}{'p99 ms':>9}{'tokens':>10}{'cost $':>10}"
    )
    lines.append(header + (f"{'live $':>10}{'batch $':>10}{'in batches':>12}" if batched else ""))
    for name, p in sorted(report["providers"].items()):
        lat = p["latency_ms"]
        split = (
            f"{p.get('live_cost_usd', 0.0):>10.4f}{p.get('batch_cost_usd', 0.0):>10.4f}"
            f"{p.get('batch_items', 0):>12}"
            if batched
            else ""
        )
        lines.append(
            f"  {name:<{w}}{p['request_count']:>9}{p['success_count']:>8}{p['error_count']:>8}"
            f"{p['rate_limited']:>6}{lat['p50']:>9.0f}{lat['p95']:>9.0f}{lat['p99']:>9.0f}"
            f"{p['prompt_tokens'] + p['completion_tokens']:>10}{p['cost_usd']:>10.4f}{split}"
        )
    if batched:
        ended = ", ".join(f"{k} {v}" for k, v in batches["ended"].items()) or "none ended"
        lines.append(
            f"  batches: {batches['submitted']} submitted, {batches['resumed']} resumed ({ended}); "
            f"{batches['items_succeeded']} items answered, {batches['resubmitted_items']} resubmitted, "
            f"{batches['sent_live_items']} sent live; ${batches['cost_usd']:.4f} "
            f"(${batches['live_cost_usd']:.4f} live, saving ${batches['saving_usd']:.4f})"
        )
    lines += _summary_notes(report)
    return "\n".join(lines)


def _summary_notes(report: dict[str, Any]) -> list[str]:
    """The lines under the summary's table: errors, prices, retry rounds, skipped and invalid lines."""
    lines: list[str] = []
    if report["errors_by_kind"]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report["errors_by_kind"].items()))
        lines.append(f"  errors by kind: {kinds}")
    if report.get("retries_by_cause"):
        lines.append(
            f"  retries by cause: {', '.join(f'{k} {v}' for k, v in report['retries_by_cause'].items())}"
        )
    lines += [f"  {line}" for line in [*report.get("unreachable", []), *cache_lines(report)]]
    by_note: dict[str, list[str]] = {}
    for model, note in sorted((report.get("prices") or {}).items()):
        by_note.setdefault(note, []).append(model)
    lines += [f"  {note}: {', '.join(models)}" for note, models in by_note.items()]
    if report.get("retry_rounds"):
        lines.append(f"  failed items re-run in {plural(report['retry_rounds'], 'round')} (--retry-failed)")
    if report.get("skipped_invalid_lines"):
        skipped = plural(report["skipped_invalid_lines"], "invalid input line")
        numbers = ", ".join(str(s["line"]) for s in report.get("skipped_lines", [])[:10])
        more = " ..." if report["skipped_invalid_lines"] > 10 else ""
        lines.append(
            f"  skipped {skipped} (lines {numbers}{more}), each with its reason in {report['errors_file']}"
        )
    if report.get("invalid_outputs"):
        ids = [item["custom_id"] for item in report["invalid_outputs"]]
        lines.append(
            f"  {report['invalid_count']} invalid outputs for review (in the errors file): "
            f"{', '.join(ids[:10])}" + (" ..." if len(ids) > 10 else "")
        )
    return lines
