"""The same durability, budget and validation cases through the CLI and through the Python job API
(`batchgate.Job`): one behaviour, two entry points."""

from __future__ import annotations

import orjson
import pytest

from batchgate.emulator import EmulatorThread

from .entry import Entry
from .harness import (
    Cli,
    expected_ids,
    gateway_config,
    ids_once,
    kill_hard,
    provider_totals,
    read_jsonl,
    wait_for,
    write_input,
)

pytestmark = pytest.mark.acceptance

DEAR = {
    "gpt-4o-mini": {"input": 1000.0, "output": 1000.0},
    "claude-3-5-haiku-latest": {"input": 1000, "output": 1000},
}


@pytest.fixture(params=["cli", "python"])
def entry(request: pytest.FixtureRequest, cli: Cli) -> Entry:
    return Entry(request.param, cli)


@pytest.mark.slow  # a run stopped, then run again
def test_kill_9_then_the_same_call_resumes_without_resending(entry: Entry, emu: EmulatorThread) -> None:
    n = 300
    cli = entry.cli
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=16, hedge=False)  # every request counted
    out = cli.cwd / "out.jsonl"
    proc = entry.start(src, cfg, out)
    wait_for(lambda: provider_totals(emu)["completed"] >= 100, "100 answers before the kill")
    kill_hard(proc)
    wait_for(lambda: provider_totals(emu)["in_flight"] == 0, "the killed run's requests to drain")
    before = provider_totals(emu)
    stored = cli.status()["succeeded"]
    assert 0 < stored <= before["completed"] < n
    done = entry.run(src, cfg, out)
    assert done.returncode == 0, done.stderr
    after = provider_totals(emu)
    assert after["admitted"] - before["admitted"] == n - stored  # nothing stored was sent again
    # only answers the kill lost are sent again; each provider counts its own duplicates, so one
    # re-sent to the route's other provider (paced at the limits its headers report) is not seen
    assert after["duplicates"] <= before["completed"] - stored
    assert ids_once(read_jsonl(out)) == expected_ids(n)


@pytest.mark.slow  # a run stopped, then run again
def test_budget_stops_then_a_bigger_budget_finishes(entry: Entry, emu: EmulatorThread) -> None:
    n = 120
    cli = entry.cli
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, prices=DEAR, budget={"max_cost_usd": 1.0})
    out = cli.cwd / "out.jsonl"
    done = entry.run(src, cfg, out)
    assert done.returncode == 3, done.stderr
    rows = read_jsonl(out)
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["status"] == "stopped"
    assert report["stop_reason"].startswith("budget reached")
    assert 0 < report["success_count"] == len(rows) < n
    assert report["cost_usd"] <= 1.0
    assert provider_totals(emu)["admitted"] == len(rows)
    gateway_config(cfg, emu, prices=DEAR, budget={"max_cost_usd": 100.0})
    again = entry.run(src, cfg, out)
    assert again.returncode == 0, again.stderr
    assert ids_once(read_jsonl(out)) == expected_ids(n)
    assert provider_totals(emu)["duplicates"] == 0


@pytest.mark.slow
def test_invalid_answers_are_retried_then_marked_invalid(entry: Entry, emu: EmulatorThread) -> None:
    n = 30
    cli = entry.cli
    src = write_input(cli.cwd / "in.jsonl", n, lambda i: ("positive", "negative", "neutral")[i % 3])
    job = {"validate_regex": "positive|negative", "validation_attempts": 2}
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, job=job)
    out = cli.cwd / "out.jsonl"
    done = entry.run(src, cfg, out, ordered=True)
    assert done.returncode == 4, done.stderr  # finished with failed (invalid) items, both ways
    rows = read_jsonl(out)
    assert [row["custom_id"] for row in rows] == sorted(expected_ids(n))
    neutral = {f"item-{i:05d}" for i in range(n) if i % 3 == 2}
    assert {r["custom_id"] for r in rows if r["error"] and r["error"]["code"] == "invalid_output"} == neutral
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["invalid_count"] == len(neutral)
    assert provider_totals(emu)["admitted"] == n + len(neutral)
