"""A running job's snapshot (`snapshot`): the figures every display shows, `--progress json`
prints and `batchgate status` reads from the store — done, pending, in flight and waiting, rate
and ETA, 429s, retries, errors by kind, what is unreachable, tokens, cost and budget, one row per
provider (`provider_entry`: traffic, latency, quota in use, its state) and batch mode's batches."""

from __future__ import annotations

from collections.abc import Iterable

from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.progress.shapes import BudgetView, ProviderRow, Snapshot, SnapshotBatches
from batchgate.stats import GatewayStatistics, ProviderStatistics
from batchgate.text import clock_text, plural


def snapshot(
    job_id: str,
    progress: Progress,
    stats: GatewayStatistics | None,
    elapsed_s: float,
    wall: float,
    budget: BudgetView | None = None,
) -> Snapshot:
    """The figures every display shows (and `batchgate status` reads); `budget` is the budget
    used against its limits (`BudgetGuard.view`), None without one."""
    done_now = progress.succeeded + progress.failed
    rate = done_now / elapsed_s if elapsed_s > 0 else 0.0
    eta = progress.eta_view(elapsed_s)
    pending = max(0, progress.total - progress.done)
    providers = {n: provider_entry(p, progress) for n, p in (stats.providers if stats else {}).items()}
    sending = sum(p["in_flight"] for p in providers.values())  # at the providers right now
    backing_off = stats.backing_off if stats is not None else 0
    snap: Snapshot = {
        "event": "progress",
        "job": job_id,
        "time": round(wall, 3),
        "total": progress.total,
        "done": progress.done,
        "succeeded": progress.succeeded,
        "failed": progress.failed,
        "done_before": progress.done_before,
        "pending": pending,
        "in_flight": sending if stats is not None else progress.in_flight,
        "waiting": max(0, progress.in_flight - sending - backing_off) if stats is not None else 0,
        "backing_off": backing_off,
        "waiting_for": {n: p["waiting"] for n, p in providers.items() if p["waiting"]},
        "rate_per_s": round(rate, 2),
        "eta_s": None if eta.seconds is None else round(eta.seconds, 1),
        "eta_step": eta.binding,  # the step that binds a fan-out or pipeline
        "stalled_s": None if eta.stalled_s is None else round(eta.stalled_s, 1),
        "total_growing": progress.total_growing,
        "rate_limited": sum(p["rate_limited"] for p in providers.values()),
        "retries": sum(p["retries"] for p in providers.values()),
        "errors_by_kind": _sum_kinds(providers.values()),
        "unreachable": [line for n, p in sorted(providers.items()) if (line := _unreachable_line(n, p))],
        "tokens": progress.prompt_tokens + progress.completion_tokens + progress.validation_tokens,
        "cost_usd": round(progress.cost_usd, 6),
        "budget": budget,
        "elapsed_s": round(elapsed_s, 2),
        "providers": providers,
    }
    batches = _batches(progress)
    if batches is not None:
        snap["batches"] = batches
    return snap


def provider_entry(p: ProviderStatistics, progress: Progress) -> ProviderRow:
    """One provider's row: traffic, errors by kind, latency, its quota in use, its state."""
    quota = p.quota
    used = quota.in_use() if quota is not None else {}
    if p.circuit == "out":
        state = "taken out"
    elif p.paused_since is not None:
        state = f"waiting since {clock_text(p.paused_since)}"
    elif p.unreachable:
        state = "unreachable"
    elif quota is not None and quota.paused_until is not None:
        state = "paused"
    else:
        state = {"closed": "ok", "open": "circuit open", "half_open": "probing"}.get(p.circuit, p.circuit)
    return {
        "requests": p.requests,
        "ok": p.succeeded,
        "errors": p.failed_attempts,
        "rate_limited": p.rate_limited,
        "retries": p.retries,
        "errors_by_kind": dict(p.errors_by_kind),
        "in_flight": p.in_flight,
        "waiting": quota.waiters if quota is not None else 0,
        "quota_used": used,
        "quota_learned": quota is not None and quota.learned,
        "tokens": p.prompt_tokens + p.completion_tokens,
        "p50_ms": round(p.latency_p50_ms, 1),
        "p95_ms": round(p.latency_p95_ms, 1),
        "cost_usd": round(progress.cost_by_provider.get(p.name, 0.0), 6),
        "batch_cost_usd": round(progress.batch_cost_by_provider.get(p.name, 0.0), 6),
        "state": state,
        "circuit": p.circuit,
        "paused_since": None if p.paused_since is None else round(p.paused_since, 3),
        "unreachable": (
            {"cause": p.unreachable_cause or "unreachable", "attempts": p.unreachable_attempts}
            if p.unreachable
            else None
        ),
    }


def _sum_kinds(providers: Iterable[ProviderRow]) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for p in providers:
        for kind, n in p["errors_by_kind"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    return dict(sorted(kinds.items()))


def _batches(progress: Progress) -> SnapshotBatches | None:
    view = progress.batches()
    if not view:
        return None
    counters = view.get("stats", {})
    return {
        "open": view.get("open", 0),
        "items": view.get("items", 0),
        "processed": view.get("processed", 0),
        "by_state": view.get("by_state", {}),
        "submitted": counters.get("batches_submitted", 0),
        "resumed": counters.get("batches_resumed", 0),
        "ended": counters.get("batches_ended", {}),
        "list": view.get("batches", []),
    }


def _unreachable_line(name: str, p: ProviderRow) -> str | None:
    """`waiting for alpha since 12:03:04`, `alpha unreachable: connection refused, 3 attempts`."""
    since, gone = p["paused_since"], p["unreachable"]
    if since is not None:
        return f"waiting for {name} since {clock_text(since)}"
    return (
        None
        if gone is None
        else f"{name} unreachable: {gone['cause']}, {plural(gone['attempts'], 'attempt')}"
    )
