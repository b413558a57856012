"""The report: segments of several runs merged, a killed run's figures folded in once, the
summary table, and invalid outputs read back from the store."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from batchgate.jobs.output.files import format_error_line
from batchgate.jobs.report.build import (
    build_report,
    fold_open_segment,
    load_invalid,
    merge_segments,
)
from batchgate.jobs.report.provider_figures import hist_add, hist_percentiles
from batchgate.jobs.report.shapes import ProviderFigures, Segment, dump_segments, load_segments
from batchgate.jobs.report.summary import render_summary
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskOutcome, TaskState

from .factories import job, outcome, specs


def _provider(requests: int, ok: int, errors: int, latencies: list[float], **extra: Any) -> ProviderFigures:
    hist: dict[str, int] = {}
    for ms in latencies:
        hist_add(hist, ms)
    ordered = sorted(latencies)
    figures: ProviderFigures = {
        "request_count": requests,
        "success_count": ok,
        "error_count": errors,
        "rate_limited": extra.get("rate_limited", 0),
        "retries": extra.get("retries", 0),
        "errors_by_kind": extra.get("errors_by_kind", {}),
        "avg_latency_ms": sum(latencies) / len(latencies) if latencies else 0.0,
        "latency_ms": {"p50": ordered[len(ordered) // 2] if ordered else 0.0, "p95": 0.0, "p99": 0.0},
        "latency_hist": hist,
        "prompt_tokens": 10 * ok,
        "completion_tokens": 2 * ok,
        "wasted_tokens": extra.get("wasted_tokens", 0),
        "validation_tokens": extra.get("validation_tokens", 0),
        "cost_usd": 0.5,
    }
    if "retries_by_kind" in extra:
        figures["retries_by_kind"] = extra["retries_by_kind"]
    return figures


def test_histogram_percentiles_within_two_percent() -> None:
    hist: dict[str, int] = {}
    values = [float(v) for v in range(1, 1001)]
    for v in values:
        hist_add(hist, v)
    got = hist_percentiles(hist)
    for value, expected in ((got["p50"], 500.0), (got["p95"], 950.0), (got["p99"], 990.0)):
        assert value == pytest.approx(expected, rel=0.02)
    assert hist_percentiles({}) == {"p50": 0.0, "p95": 0.0, "p99": 0.0}


def test_merge_sums_counters_and_weights_latency() -> None:
    first: Segment = {
        "run_id": "a",
        "elapsed_ms": 1000,
        "providers": {
            "alpha": _provider(10, 8, 2, [100.0] * 10, rate_limited=2, errors_by_kind={"rate_limit": 2}),
        },
    }
    second: Segment = {
        "run_id": "b",
        "elapsed_ms": 500,
        "providers": {
            "alpha": _provider(30, 30, 0, [300.0] * 30, retries=1, validation_tokens=7, wasted_tokens=3),
            "gamma": _provider(4, 4, 0, [50.0] * 4),
        },
    }
    elapsed, merged = merge_segments([first, second])
    assert elapsed == 1500
    alpha = merged["alpha"]
    assert alpha["request_count"] == 40
    assert alpha["success_count"] == 38
    assert alpha["error_count"] == 2
    assert alpha["rate_limited"] == 2
    assert alpha["retries"] == 1
    assert alpha["errors_by_kind"] == {"rate_limit": 2}
    assert alpha["avg_latency_ms"] == pytest.approx(250.0)  # (10 x 100 + 30 x 300) / 40
    assert alpha["latency_ms"]["p50"] == pytest.approx(300.0, rel=0.02)  # from the merged histogram
    assert alpha["latency_ms"]["p95"] == pytest.approx(300.0, rel=0.02)
    assert alpha["cost_usd"] == pytest.approx(1.0)
    assert merged["gamma"]["latency_ms"]["p50"] == 50.0  # one run: its exact figure is kept
    assert "latency_hist" not in alpha

    report = build_report(
        job(task_total=50),
        {TaskState.SUCCEEDED: 42, TaskState.FAILED: 2, TaskState.PENDING: 6, TaskState.RUNNING: 0},
        {"prompt_tokens": 420.0, "completion_tokens": 84.0, "cost_usd": 1.25, "attempts": 50.0},
        [first, second],
    )
    assert report["runs"] == 2
    assert report["total_elapsed_ms"] == 1500
    assert report["success_count"] == 42
    assert report["failed_count"] == 2
    assert report["pending_count"] == 6
    assert report["token_usage"] == {
        "prompt_tokens": 420,
        "completion_tokens": 84,
        "retry_extra_tokens": 10,
        "hedge_duplicate_tokens": 0,
    }
    assert report["rate_limited"] == 2
    assert report["errors_by_kind"] == {"rate_limit": 2}
    assert report["cost_usd"] == 1.25
    summary = render_summary(report)
    assert "alpha" in summary
    assert "gamma" in summary
    assert "rate_limit 2" in summary


def test_retries_are_shown_by_cause_merged_over_runs() -> None:
    """Issue 38: the report and its summary say what the retries were spent on."""
    runs: list[Segment] = [
        {
            "run_id": r,
            "elapsed_ms": 10,
            "providers": {"alpha": _provider(4, 2, 2, [1.0] * 4, retries=2, retries_by_kind=kinds)},
        }
        for r, kinds in (("a", {"server_error": 1, "too_large": 1}), ("b", {"server_error": 1}))
    ]
    _, merged = merge_segments(runs)
    assert merged["alpha"]["retries_by_kind"] == {"server_error": 2, "too_large": 1}
    report = build_report(job(task_total=4), {TaskState.SUCCEEDED: 4}, {}, runs)
    assert report["retries_by_cause"] == {"server_error": 2, "too_large": 1}
    assert "retries by cause: server_error 2, too_large 1" in render_summary(report)


def test_open_segment_of_a_killed_run_is_folded_once() -> None:
    segments = load_segments(dump_segments([{"run_id": "a", "elapsed_ms": 10, "providers": {}}]))
    killed = orjson.dumps({"run_id": "b", "finished": False, "elapsed_ms": 5, "providers": {}})
    assert fold_open_segment(segments, killed)
    assert [s["run_id"] for s in segments] == ["a", "b"]
    assert not fold_open_segment(segments, killed)  # that run is in already
    assert not fold_open_segment(segments, b"")
    assert not fold_open_segment(segments, None)
    assert len(segments) == 2


async def test_invalid_outputs_are_read_from_the_store() -> None:
    store = MemoryJobStore()
    await store.create_job(job())
    await store.add_tasks("job1", specs(4))
    await store.claim_tasks("job1", 4)
    invalid = format_error_line(
        "req-1",
        status_code=200,
        code="invalid_output",
        message="no match",
        provider="a",
        attempts=2,
        latency_ms=1,
    )
    await store.complete_tasks(
        "job1",
        [
            outcome(0),
            TaskOutcome(1, TaskState.FAILED, 2, invalid, "invalid_output: no match", "a"),
            outcome(2, TaskState.FAILED),
        ],
    )
    count, items = await load_invalid(store, "job1")
    assert count == 1
    assert items == [{"custom_id": "req-1", "line": 2, "problem": "no match"}]
    assert (await load_invalid(store, "job1", limit=0)) == (1, [])


def test_batches_merge_over_runs_with_the_cost_split_and_saving() -> None:
    provider = _provider(4, 4, 0, [10.0] * 4)
    provider |= {"cost_usd": 0.75, "batch_cost_usd": 0.25}  # 0.5 live
    first: Segment = {"run_id": "r1", "elapsed_ms": 100, "providers": {"p": provider}}
    first["batches"] = {
        "batches_submitted": 2,
        "batches_ended": {"expired": 1},
        "succeeded": 3,
        "resubmitted": 1,
        "cost_usd": 0.25,
        "live_cost_usd": 0.5,
        "by_provider": {"p": {"items": 3, "cost_usd": 0.25, "live_cost_usd": 0.5}},
    }
    second: Segment = {
        "run_id": "r2",
        "elapsed_ms": 50,
        "providers": {"p": {"cost_usd": 0.1, "batch_cost_usd": 0.1}},
        "batches": {
            "batches_resumed": 1,
            "batches_ended": {"completed": 1},
            "succeeded": 1,
            "sent_live": 2,
            "cost_usd": 0.1,
            "live_cost_usd": 0.2,
            "by_provider": {
                "p": {
                    "items": 1,
                    "succeeded": 1,
                    "prompt_tokens": 7,
                    "completion_tokens": 3,
                    "cost_usd": 0.1,
                    "live_cost_usd": 0.2,
                }
            },
        },
    }
    counts = {TaskState.SUCCEEDED: 4}
    report = build_report(job(task_total=4), counts, {"cost_usd": 0.85}, [first, second])
    b = report["batches"]
    assert (b["submitted"], b["resumed"], b["ended"]) == (2, 1, {"completed": 1, "expired": 1})
    assert (b["items_succeeded"], b["resubmitted_items"], b["sent_live_items"]) == (4, 1, 2)
    assert (b["cost_usd"], b["live_cost_usd"], b["saving_usd"]) == (0.35, 0.7, 0.35)
    assert b["by_provider"]["p"] == {
        "items": 4,
        "cost_usd": 0.35,
        "live_cost_usd": 0.7,
        "saving_usd": 0.35,
    } | {
        "succeeded": 1,  # the first run's figures predate the per-provider item states and tokens
        "failed": 0,
        "prompt_tokens": 7,
        "completion_tokens": 3,
    }
    p = report["providers"]["p"]
    assert (p["batch_items"], p["batch_succeeded"], p["batch_failed"]) == (4, 1, 0)
    live = _provider(4, 4, 0, [10.0] * 4)
    assert (p["request_count"], p["success_count"]) == (4 + 4, 4 + 1)  # live and through batches
    assert (p["prompt_tokens"], p["completion_tokens"]) == (
        live["prompt_tokens"] + 7,
        live["completion_tokens"] + 3,
    )
    assert (p["cost_usd"], p["batch_cost_usd"], p["live_cost_usd"]) == (0.85, 0.35, 0.5)
    assert p["batch_saving_usd"] == 0.35
    assert report["cost_split"] == {
        "live_usd": 0.5,
        "batch_usd": 0.35,
        "all_live_usd": 1.2,
        "batch_saving_usd": 0.35,
    }
    text = render_summary(report)
    assert "batches: 2 submitted, 1 resumed (completed 1, expired 1)" in text
    assert "saving $0.3500" in text
    plain = build_report(job(task_total=4), counts, {}, [{"run_id": "r", "providers": {}}])
    assert plain["batches"]["submitted"] == 0
    assert "batches:" not in render_summary(plain)
