"""Guards and checks end to end: the budget stop, the error-rate stop, output validation with
retries, the dry run — each judged by the exit code, OUT, the report and the emulator's counters."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from batchgate.emulator import EmulatorThread

from .harness import (
    Cli,
    emulator,
    expected_ids,
    gateway_config,
    ids_once,
    provider_totals,
    read_jsonl,
    write_input,
)

pytestmark = pytest.mark.acceptance

# One token costs $0.001 on either target, so ~40 tokens per item make a budget easy to reason about.
DEAR = {
    "gpt-4o-mini": {"input": 1000.0, "output": 1000.0},
    "claude-3-5-haiku-latest": {"input": 1000, "output": 1000},
}


@pytest.mark.slow  # several CLI runs
def test_budget_stops_cleanly_then_a_bigger_budget_finishes(cli: Cli, emu: EmulatorThread) -> None:
    n = 120
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, prices=DEAR, budget={"max_cost_usd": 1.0})
    out = cli.cwd / "out.jsonl"

    plan = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--dry-run", store=False)
    assert plan.returncode == 0, plan.stderr
    assert "alpha" in plan.stdout
    assert "gamma" in plan.stdout
    assert "OVER" in plan.stdout
    assert provider_totals(emu)["admitted"] == 0
    assert not out.exists()

    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    assert done.returncode == 3, done.stderr
    assert "budget reached" in done.stderr
    assert "resume with" in done.stderr
    rows = read_jsonl(out)
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["status"] == "stopped"
    assert report["stop_reason"].startswith("budget reached")
    assert 0 < report["success_count"] == len(rows) < n
    assert report["cost_usd"] <= 1.0  # never over: each call was reserved at its worst case first
    assert provider_totals(emu)["admitted"] == len(rows)  # nothing sent that was not stored

    bigger = gateway_config(cli.cwd / "gw2.yaml", emu, prices=DEAR, budget={"max_cost_usd": 100.0})
    resumed = cli.run("resume", report["batch_id"], "--config", str(bigger), "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert ids_once(read_jsonl(out)) == expected_ids(n)
    assert provider_totals(emu)["duplicates"] == 0


@pytest.mark.slow  # several CLI runs
def test_error_rate_stop(cli: Cli, tmp_path: Path) -> None:
    failing = emulator(faults={"server_error": 1.0})
    try:
        n = 200
        src = write_input(cli.cwd / "in.jsonl", n)
        job = {"error_rate_threshold": 0.5, "error_rate_window": 10}
        cfg = gateway_config(cli.cwd / "gw.yaml", failing, concurrency=4, max_attempts=1, job=job)
        out = cli.cwd / "out.jsonl"
        done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
        assert done.returncode == 3, done.stderr
        assert "error rate" in done.stderr
        rows = read_jsonl(out)
        assert 10 <= len(rows) < n  # it took a full window to trip, and it did not run everything
        assert all(row["error"]["code"] == "server_error" for row in rows)
        # The errors file holds every failure as an input line that can be fed back.
        errors = cli.cwd / "out.jsonl.errors.jsonl"
        assert ids_once(read_jsonl(errors)) == {row["custom_id"] for row in rows}
        plan = cli.run("plan", str(errors), "--config", str(cfg), "--json", store=False)
        assert plan.returncode == 0, plan.stderr
        assert orjson.loads(plan.stdout)["tasks"] == len(rows)
        status = cli.status()
        assert status["state"] == "stopped"
        assert status["failed"] == len(rows)
        assert status["pending"] == n - len(rows)
    finally:
        failing.stop()


@pytest.mark.slow
def test_invalid_outputs_are_retried_then_listed_never_written_as_successes(
    cli: Cli, emu: EmulatorThread
) -> None:
    n = 30
    mood = {0: "positive", 1: "negative", 2: "neutral"}  # the emulator answers "neutral" to the third
    src = write_input(cli.cwd / "in.jsonl", n, lambda i: mood[i % 3])
    job = {"validate_regex": "positive|negative", "validation_attempts": 2}
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, job=job)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--ordered", "-q")
    assert done.returncode == 4, done.stderr  # finished, with items that failed the check
    rows = read_jsonl(out)
    assert [row["custom_id"] for row in rows] == sorted(expected_ids(n))  # --ordered: input order
    neutral = {f"item-{i:05d}" for i in range(n) if i % 3 == 2}
    for row in rows:
        if row["custom_id"] in neutral:
            assert row["error"]["code"] == "invalid_output"
            assert "neutral" in row["error"]["message"]
            assert row["attempts"] == 2
        else:
            assert row["error"] is None
            answer = row["response"]["body"]["choices"][0]["message"]["content"]
            assert answer in ("positive", "negative")
    assert {r["custom_id"] for r in read_jsonl(cli.cwd / "out.jsonl.errors.jsonl")} == neutral
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["invalid_count"] == len(neutral)
    assert {item["custom_id"] for item in report["invalid_outputs"]} == neutral
    assert report["token_usage"]["retry_extra_tokens"] > 0
    # each invalid item was asked twice; every other item once
    assert provider_totals(emu)["admitted"] == n + len(neutral)
