"""The report's summary: the plain-text table (no colour codes) printed at the end of a run, by
`batchgate cancel` and by `batchgate report --summary` — each provider's traffic, latency, tokens
and cost, what batch mode did, and the notes under it (errors, prices, retry rounds, skipped and
invalid lines)."""

from __future__ import annotations

from batchgate.config.job_spec import spec_line
from batchgate.jobs.cache.cached import cache_lines
from batchgate.jobs.report.shapes import Report
from batchgate.text import plural


def render_summary(report: Report) -> str:
    """A plain-text table (no colour codes) for the end of a run and `batchgate report`."""
    lines = [
        f"job {report['batch_id']}{spec_line(report['job'])}: {report['status']}"
        + (f" ({report['stop_reason']})" if report.get("stop_reason") else ""),
        f"  {report['success_count']} succeeded, {report['failed_count']} failed, "
        f"{report['pending_count']} pending of {report['task_total']}  ·  "
        f"{report['total_elapsed_ms'] / 1000:.1f} s  ·  ${report['cost_usd']:.4f}  ·  "
        f"{report['rate_limited']} x 429, {report['retries']} retries",
    ]
    batches = report["batches"]
    batched = bool(batches["submitted"] or batches["resumed"])
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


def _summary_notes(report: Report) -> list[str]:
    """The lines under the summary's table: errors, prices, retry rounds, skipped and invalid lines."""
    lines: list[str] = []
    if report["errors_by_kind"]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report["errors_by_kind"].items()))
        lines.append(f"  errors by kind: {kinds}")
    if report.get("retries_by_cause"):
        lines.append(
            f"  retries by cause: {', '.join(f'{k} {v}' for k, v in report['retries_by_cause'].items())}"
        )
    lines += [f"  {line}" for line in [*report.get("unreachable", []), *cache_lines(report.get("cache"))]]
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
