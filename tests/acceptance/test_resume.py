"""Durability: kill -9 mid-run then `batchgate resume`, Ctrl-C then re-running the same command,
and a changed input refused — judged by the emulator's counters and by OUT."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
import pytest

from batchgate.emulator import EmulatorThread

from .harness import (
    Cli,
    expected_ids,
    finish,
    gateway_config,
    ids_once,
    kill_hard,
    leftovers,
    provider_totals,
    read_jsonl,
    wait_for,
    write_input,
)

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]  # runs interrupted, then resumed


def test_kill_9_then_resume_sends_no_succeeded_item_twice(
    cli: Cli, emu: EmulatorThread, tmp_path: Path
) -> None:
    n = 400
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=16)
    out = cli.cwd / "out.jsonl"
    proc = cli.start("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet")
    wait_for(lambda: provider_totals(emu)["completed"] >= 120, "120 answers before the kill")
    kill_hard(proc)
    wait_for(lambda: provider_totals(emu)["in_flight"] == 0, "the killed run's requests to drain")
    before = provider_totals(emu)
    assert before["duplicates"] == 0
    assert out.read_bytes().endswith(b"\n")  # OUT is appended as results commit: whole lines

    status = cli.status()
    job = status["job"]
    assert status["state"] == "interrupted"  # recorded running, nobody holds its lock
    stored = status["succeeded"]
    assert 0 < stored <= before["completed"] < n

    # resume by job id from another directory: the job recorded absolute paths
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = cli.run("resume", job, "--progress", "quiet", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    after = provider_totals(emu)

    # Every item not stored as succeeded was sent exactly once more, and nothing else was sent:
    # no item that had succeeded before the kill reached the provider again.
    assert after["admitted"] - before["admitted"] == n - stored
    # Resends of answered prompts are exactly the answers lost in flight at the kill.
    # only answers the kill lost are sent again; each provider counts its own duplicates, so one
    # re-sent to the route's other provider (paced at the limits its headers report) is not seen
    assert after["duplicates"] <= before["completed"] - stored

    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    assert all(row["error"] is None and row["response"]["status_code"] == 200 for row in rows)
    assert {row["provider"] for row in rows} <= {"alpha", "gamma"}
    assert all(row["attempts"] >= 1 and row["usage"]["total_tokens"] > 0 for row in rows)
    assert (cli.cwd / "out.jsonl.errors.jsonl").read_bytes() == b""
    assert not list(leftovers(cli.cwd))

    report = cli.report(job)
    assert report["status"] == "completed"
    assert report["success_count"] == n
    assert report["failed_count"] == 0
    assert report["token_usage"]["prompt_tokens"] > 0
    listing = cli.run("jobs")
    assert job in listing.stdout
    assert "completed" in listing.stdout


def test_ctrl_c_stops_gracefully_and_rerunning_the_command_resumes(cli: Cli, emu: EmulatorThread) -> None:
    n = 300
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=12)
    out = cli.cwd / "out.jsonl"
    command = ("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "json")
    proc = cli.start(*command)
    wait_for(lambda: provider_totals(emu)["completed"] >= 60, "60 answers before Ctrl-C")
    code, stdout, stderr = finish(proc, signal.SIGINT)
    assert code == 130, stderr
    events = [orjson.loads(line) for line in stdout.splitlines()]  # stdout is pure JSON lines
    names = [e["event"] for e in events]
    assert names[0] == "started"
    assert "stopping" in names
    assert names[-1] == "stopped"
    stopped = events[-1]
    assert stopped["exit_code"] == 130
    assert stopped["reason"] == "interrupted by SIGINT"
    assert "resume with: batchgate resume job-" in stderr
    assert "Traceback" not in stderr

    # Graceful: everything answered during the grace period was stored, so OUT holds exactly the
    # answers the provider gave, and resuming resends none of them.
    before = provider_totals(emu)
    partial = read_jsonl(out)
    assert len(ids_once(partial)) == before["completed"] == stopped["written"]
    assert 0 < len(partial) < n
    status = cli.status(stopped["job"])
    assert status["state"] == "stopped"
    assert status["pending"] == n - len(partial)

    # A changed input under the job is refused (one line), and nothing is sent.
    original = src.read_bytes()
    src.write_bytes(original + original.splitlines(keepends=True)[0].replace(b"item-00000", b"item-new"))
    refused = cli.run(*command)
    assert refused.returncode == 2
    assert "changed since job" in refused.stderr
    assert "--allow-changed-input" in refused.stderr
    assert provider_totals(emu)["admitted"] == before["admitted"]
    src.write_bytes(original)

    resumed = cli.run(*command)
    assert resumed.returncode == 0, resumed.stderr
    after = provider_totals(emu)
    assert after["duplicates"] == 0
    assert after["admitted"] - before["admitted"] == n - len(partial)
    assert ids_once(read_jsonl(out)) == expected_ids(n)
    report = cli.report(stopped["job"])
    assert report["runs"] == 2
    assert report["success_count"] == n
    assert sum(p["request_count"] for p in report["providers"].values()) == after["admitted"]
