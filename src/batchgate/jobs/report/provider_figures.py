"""A run's per-provider report figures, from one of two sources, never mixed within a report.

- `gateway_providers`: the gateway's counters (`Gateway.statistics()`). A CLI run owns its gateway,
  so these are exactly the job's traffic, hedged legs and their duplicate tokens included.
- `own_providers`: the job's own tallies (`Progress.tallies`, filled from each result's attempts by
  `tally_result`). A server runs every job on one shared gateway, whose counters add up all jobs'
  traffic; a server job's report shows these instead. Hedges are not attributed to a job: a
  server job's `hedged` / `duplicate_tokens` are 0, and the gateway's are in `provider_state`.
- `shared_state`: what only the gateway knows (circuit, quota in use, pause, reachability, its
  totals over all jobs), labelled `provider_state` with `"scope": "gateway"` in a server job's report.

Latency histograms (`hist_add`): bucket i holds latencies near HIST_BASE**i ms (2 % wide), so runs
merge exactly up to the bucket width while a provider's histogram stays a few hundred entries at most.
"""

from __future__ import annotations

import math
from typing import Literal

from batchgate.errors import UnreachableError
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.report.shapes import Percentiles, ProviderFigures, ProviderState, ReportProvider
from batchgate.models import Result
from batchgate.stats import GatewayStatistics

HIST_BASE = 1.02


def hist_add(hist: dict[str, int], ms: float) -> None:
    key = str(round(math.log(max(ms, 1.0), HIST_BASE)))
    hist[key] = hist.get(key, 0) + 1


def hist_percentiles(hist: dict[str, int]) -> Percentiles:
    """Nearest-rank p50/p95/p99 (ms) of a histogram; zeros for an empty one."""
    buckets = sorted((int(k), n) for k, n in hist.items() if n > 0)
    count = sum(n for _, n in buckets)
    if not count:
        return Percentiles(p50=0.0, p95=0.0, p99=0.0)

    def at(q: int) -> float:
        rank = max(0, min(count - 1, round(q / 100.0 * (count - 1))))
        seen = 0
        for key, n in buckets:
            seen += n
            if seen > rank:
                return round(HIST_BASE**key, 1)
        return 0.0

    return Percentiles(p50=at(50), p95=at(95), p99=at(99))


def tally_result(progress: Progress, result: Result) -> None:
    """Count one gateway result's attempts in the job's own per-provider tallies and histograms.
    A failed attempt followed by another attempt of the same request counts as a retry."""
    last = len(result.attempts) - 1
    for i, attempt in enumerate(result.attempts):
        hist_add(progress.latency_hist(attempt.provider), attempt.latency_ms)
        tally = progress.tally(attempt.provider)
        tally.attempts += 1
        tally.latency_ms += attempt.latency_ms
        kind = attempt.error_kind
        if kind is None:
            continue
        tally.errors += 1
        tally.errors_by_kind[kind] = tally.errors_by_kind.get(kind, 0) + 1
        tally.wasted_tokens += attempt.tokens_charged
        if i < last:
            tally.retries += 1
            tally.retries_by_kind[kind] = tally.retries_by_kind.get(kind, 0) + 1
        if kind == "rate_limit":
            tally.rate_limited += 1
        if kind == "unreachable":
            tally.unreachable_attempts += 1
    err = result.error
    if isinstance(err, UnreachableError) and result.provider is not None:
        progress.tally(result.provider).unreachable_cause = err.cause
    if result.ok and result.provider is not None:
        tally = progress.tally(result.provider)
        tally.answered += 1
        if result.usage is not None:
            tally.prompt_tokens += result.usage.prompt_tokens
            tally.completion_tokens += result.usage.completion_tokens


def _costs(name: str, progress: Progress) -> ProviderFigures:
    return {
        "batch_cost_usd": round(progress.batch_cost_by_provider.get(name, 0.0), 6),
        "validation_tokens": progress.validation_by_provider.get(name, 0),
        "cost_usd": round(progress.cost_by_provider.get(name, 0.0), 6),
        "latency_hist": dict(progress.latency.get(name, {})),
    }


def gateway_providers(stats: GatewayStatistics, progress: Progress) -> dict[str, ProviderFigures]:
    """Each provider's figures from the gateway's counters (a gateway the job owns)."""
    return {
        name: {
            "request_count": p.requests,
            "success_count": p.succeeded,
            "error_count": p.failed_attempts,
            "rate_limited": p.rate_limited,
            "retries": p.retries,
            "retries_by_kind": dict(p.retries_by_kind),
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
            "hedged": p.hedged,
            "duplicate_tokens": p.duplicate_tokens,
            "unreachable_attempts": p.unreachable_attempts,
            "unreachable_cause": p.unreachable_cause,
        }
        | _costs(name, progress)
        for name, p in stats.providers.items()
    }


def own_providers(progress: Progress) -> dict[str, ProviderFigures]:
    """Each provider's figures from the job's own tallies (a gateway other jobs share)."""
    out: dict[str, ProviderFigures] = {}
    for name, t in progress.tallies.items():
        out[name] = {
            "request_count": t.attempts,
            "success_count": t.answered,
            "error_count": t.errors,
            "rate_limited": t.rate_limited,
            "retries": t.retries,
            "retries_by_kind": dict(t.retries_by_kind),
            "errors_by_kind": dict(t.errors_by_kind),
            "avg_latency_ms": round(t.latency_ms / t.attempts, 1) if t.attempts else 0.0,
            "latency_ms": hist_percentiles(progress.latency.get(name, {})),
            "prompt_tokens": t.prompt_tokens,
            "completion_tokens": t.completion_tokens,
            "wasted_tokens": t.wasted_tokens,
            "hedged": 0,
            "duplicate_tokens": 0,
            "unreachable_attempts": t.unreachable_attempts,
            "unreachable_cause": t.unreachable_cause,
        } | _costs(name, progress)
    for name in progress.cost_by_provider.keys() - out.keys():  # answered through batches only
        out[name] = _costs(name, progress)
    return out


def shared_state(stats: GatewayStatistics) -> dict[str, ProviderState]:
    """What only the shared gateway knows, per provider, over every job it runs."""
    out: dict[str, ProviderState] = {}
    for name, p in stats.providers.items():
        quota = p.quota
        used = quota.in_use() if quota is not None else {}
        out[name] = {
            "scope": "gateway",
            "circuit": p.circuit,
            "unreachable": p.unreachable,
            "paused": quota is not None and quota.paused_until is not None,
            "quota_used": used,
            "requests": p.requests,
            "success_count": p.succeeded,
            "error_count": p.failed_attempts,
            "hedged": p.hedged,
            "duplicate_tokens": p.duplicate_tokens,
        }
    return out


def by_kind(
    providers: dict[str, ReportProvider], key: Literal["errors_by_kind", "retries_by_kind"]
) -> dict[str, int]:
    """A report's `key` (errors_by_kind, retries_by_kind) summed over its providers."""
    out: dict[str, int] = {}
    for p in providers.values():
        for kind, n in p[key].items():
            out[kind] = out.get(kind, 0) + n
    return dict(sorted(out.items()))
