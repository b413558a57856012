"""A job's own per-provider figures, counted from its results' attempts: a failed attempt followed
by another is a retry, its charged tokens are wasted, the answer's tokens go to the provider that
answered; a shared gateway's job reports these and keeps the gateway's state apart."""

from __future__ import annotations

from batchgate.errors import UnreachableError
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.report.build import merge_segments
from batchgate.jobs.report.provider_figures import own_providers, tally_result
from batchgate.models import Attempt, Result, Usage


def _failover() -> Result:
    """alpha 429, alpha 500 (charged 7 tokens), then gamma answers."""
    return Result(
        index=0,
        ok=True,
        provider="gamma",
        usage=Usage(prompt_tokens=11, completion_tokens=3),
        attempts=[
            Attempt("alpha", 0.0, 10.0, 429, "rate_limit"),
            Attempt("alpha", 0.1, 30.0, 500, "server_error", tokens_charged=7),
            Attempt("gamma", 0.2, 20.0, 200, tokens_charged=14),
        ],
    )


def test_a_result_s_attempts_are_counted_for_the_provider_each_went_to() -> None:
    progress = Progress(started=0.0, total=2, shared_gateway=True)
    tally_result(progress, _failover())
    refused = UnreachableError("no", provider="alpha", cause="connection refused")
    gone = Result(
        index=1,
        ok=False,
        provider="alpha",
        error=refused,
        attempts=[Attempt("alpha", 0.0, 1.0, None, "unreachable")],
    )
    tally_result(progress, gone)
    figures = own_providers(progress)
    alpha, gamma = figures["alpha"], figures["gamma"]
    assert (alpha["request_count"], alpha["success_count"], alpha["error_count"]) == (3, 0, 3)
    assert alpha["errors_by_kind"] == {"rate_limit": 1, "server_error": 1, "unreachable": 1}
    assert (alpha["rate_limited"], alpha["retries"], alpha["wasted_tokens"]) == (1, 2, 7)
    assert (alpha["unreachable_attempts"], alpha["unreachable_cause"]) == (1, "connection refused")
    assert (gamma["request_count"], gamma["success_count"], gamma["error_count"]) == (1, 1, 0)
    assert (gamma["prompt_tokens"], gamma["completion_tokens"], gamma["avg_latency_ms"]) == (11, 3, 20.0)
    assert gamma["latency_ms"]["p50"] > 0


def test_own_figures_merge_like_the_gateway_s() -> None:
    progress = Progress(started=0.0, total=1, shared_gateway=True)
    tally_result(progress, _failover())
    progress.add_cost("gamma", 0.5)
    progress.add_cost("beta", 0.25, batch=True)  # a provider answering through its Batch API only
    _, merged = merge_segments([{"providers": own_providers(progress)}])
    assert merged["gamma"]["cost_usd"] == 0.5
    assert (merged["beta"]["request_count"], merged["beta"]["batch_cost_usd"]) == (0, 0.25)
    assert merged["alpha"]["avg_latency_ms"] == 20.0  # two answered attempts (10 + 30 ms)
