"""The job report: a JSON account of what happened per provider (requests, errors by kind, 429s,
retries, latency percentiles, tokens, cost), merged across the runs of a resumed job, and a
readable summary table for the terminal."""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.jobs.store import JobRecord, TaskState
from batchgate.stats import GatewayStatistics

REPORT_BLOB = "report"

_ADDITIVE = (
    "request_count",
    "success_count",
    "error_count",
    "rate_limited",
    "retries",
    "prompt_tokens",
    "completion_tokens",
    "wasted_tokens",
)


def run_segment(stats: GatewayStatistics, elapsed_s: float, costs: dict[str, float]) -> dict[str, Any]:
    """What one run (one process, from start or resume to stop) contributes to the report."""
    providers: dict[str, Any] = {}
    for name, p in stats.providers.items():
        providers[name] = {
            "request_count": p.requests,
            "success_count": p.succeeded,
            "error_count": p.failed_attempts,
            "rate_limited": p.rate_limited,
            "retries": p.retries,
            "errors_by_kind": dict(p.errors_by_kind),
            "avg_latency_ms": round(p.avg_latency_ms, 1),
            "latency_ms": {
                "p50": round(p.latency_p50_ms, 1),
                "p95": round(p.latency_p95_ms, 1),
                "p99": round(p.latency_p99_ms, 1),
            },
            "prompt_tokens": p.prompt_tokens,
            "completion_tokens": p.completion_tokens,
            "wasted_tokens": p.wasted_tokens,
            "cost_usd": round(costs.get(name, 0.0), 6),
        }
    return {"elapsed_ms": round(elapsed_s * 1000.0), "providers": providers}


def merge_segments(segments: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """Sum counters over runs; latency figures come from the latest run that sent requests."""
    elapsed = 0
    merged: dict[str, dict[str, Any]] = {}
    for seg in segments:
        elapsed += int(seg.get("elapsed_ms", 0))
        for name, p in seg.get("providers", {}).items():
            into = merged.setdefault(
                name,
                dict.fromkeys(_ADDITIVE, 0)
                | {
                    "errors_by_kind": {},
                    "avg_latency_ms": 0.0,
                    "latency_ms": {"p50": 0.0, "p95": 0.0, "p99": 0.0},
                    "cost_usd": 0.0,
                },
            )
            for k in _ADDITIVE:
                into[k] += int(p.get(k, 0))
            into["cost_usd"] = round(into["cost_usd"] + float(p.get("cost_usd", 0.0)), 6)
            for kind, n in p.get("errors_by_kind", {}).items():
                into["errors_by_kind"][kind] = into["errors_by_kind"].get(kind, 0) + int(n)
            if p.get("request_count"):
                into["avg_latency_ms"] = p.get("avg_latency_ms", 0.0)
                into["latency_ms"] = p.get("latency_ms", into["latency_ms"])
    return elapsed, merged


def build_report(
    job: JobRecord,
    counts: dict[TaskState, int],
    totals: dict[str, float],
    segments: list[dict[str, Any]],
    *,
    invalid_ids: list[str] | None = None,
) -> dict[str, Any]:
    elapsed, providers = merge_segments(segments)
    errors_by_kind: dict[str, int] = {}
    for p in providers.values():
        for kind, n in p["errors_by_kind"].items():
            errors_by_kind[kind] = errors_by_kind.get(kind, 0) + n
    return {
        "batch_id": job.job_id,
        "status": job.status,
        "stop_reason": job.stop_reason,
        "input": job.input_path,
        "output": job.output_path,
        "task_total": job.task_total,
        "success_count": counts.get(TaskState.SUCCEEDED, 0),
        "failed_count": counts.get(TaskState.FAILED, 0),
        "pending_count": counts.get(TaskState.PENDING, 0) + counts.get(TaskState.RUNNING, 0),
        "invalid_outputs": invalid_ids or [],
        "total_elapsed_ms": elapsed,
        "runs": len(segments),
        "providers": providers,
        "errors_by_kind": errors_by_kind,
        "rate_limited": sum(p["rate_limited"] for p in providers.values()),
        "retries": sum(p["retries"] for p in providers.values()),
        "token_usage": {
            "prompt_tokens": int(totals.get("prompt_tokens", 0)),
            "completion_tokens": int(totals.get("completion_tokens", 0)),
            "retry_extra_tokens": sum(p["wasted_tokens"] for p in providers.values()),
        },
        "cost_usd": round(float(totals.get("cost_usd", 0.0)), 6),
    }


def load_segments(blob: bytes | None) -> list[dict[str, Any]]:
    if not blob:
        return []
    data = orjson.loads(blob)
    return list(data.get("segments", [])) if isinstance(data, dict) else []


def dump_segments(segments: list[dict[str, Any]], invalid_ids: list[str]) -> bytes:
    return orjson.dumps({"segments": segments, "invalid_ids": invalid_ids})


def load_invalid_ids(blob: bytes | None) -> list[str]:
    if not blob:
        return []
    data = orjson.loads(blob)
    return list(data.get("invalid_ids", [])) if isinstance(data, dict) else []


def render_summary(report: dict[str, Any]) -> str:
    """A plain-text table (no colour codes) for the end of a run and `batchgate report`."""
    lines = [
        f"job {report['batch_id']}: {report['status']}"
        + (f" ({report['stop_reason']})" if report.get("stop_reason") else ""),
        f"  {report['success_count']} succeeded, {report['failed_count']} failed, "
        f"{report['pending_count']} pending of {report['task_total']}  ·  "
        f"{report['total_elapsed_ms'] / 1000:.1f} s  ·  ${report['cost_usd']:.4f}  ·  "
        f"{report['rate_limited']} x 429, {report['retries']} retries",
    ]
    header = (
        f"  {'provider':<12}{'requests':>9}{'ok':>8}{'errors':>8}{'429s':>6}{'p50 ms':>9}"
        f"{'p95 ms':>9}{'p99 ms':>9}{'tokens':>10}{'cost $':>10}"
    )
    lines.append(header)
    for name, p in sorted(report["providers"].items()):
        lat = p["latency_ms"]
        lines.append(
            f"  {name:<12}{p['request_count']:>9}{p['success_count']:>8}{p['error_count']:>8}"
            f"{p['rate_limited']:>6}{lat['p50']:>9.0f}{lat['p95']:>9.0f}{lat['p99']:>9.0f}"
            f"{p['prompt_tokens'] + p['completion_tokens']:>10}{p['cost_usd']:>10.4f}"
        )
    if report["errors_by_kind"]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report["errors_by_kind"].items()))
        lines.append(f"  errors by kind: {kinds}")
    if report.get("invalid_outputs"):
        lines.append(
            f"  invalid outputs for review: {', '.join(report['invalid_outputs'][:10])}"
            + (" ..." if len(report["invalid_outputs"]) > 10 else "")
        )
    return "\n".join(lines)
