"""Batch API job mode, end to end: `batchgate run --mode batch-api` as a subprocess against an
emulator in the test process, through every lifecycle path — completed, failed validation, expired
with partial results, cancelled with `batchgate cancel`, creation refused with 429, over-size input
split — and a kill -9 between submission and completion that resumes polling the same batch.
Each test is judged by the emulator's batch counters and by OUT."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.jobs.report.summary import render_summary

from .harness import (
    MODEL,
    Cli,
    expected_ids,
    finish,
    ids_once,
    kill_hard,
    read_jsonl,
    wait_for,
    write_input,
)

pytestmark = pytest.mark.acceptance

POLL = {"initial": 0.2, "factor": 1.5, "maximum": 1}
PRICES = {
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "claude-3-5-haiku-latest": {"input": 0.8, "output": 4.0},
}
MODELS = {"alpha": "gpt-4o-mini", "gamma": "claude-3-5-haiku-latest"}


def batch_emulator(**batch: Any) -> EmulatorThread:
    """alpha (OpenAI family) and gamma (Anthropic family), both with a Batch API shaped by `batch`."""
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.2, "per_token_ms": 0}
    providers = [
        {"name": "alpha", "family": "openai", "limits": {"rpm": 10**6, "tpm": 10**8}},
        {"name": "gamma", "family": "anthropic", "limits": {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8}},
    ]
    for p in providers:
        p["latency"] = latency
        p["batch"] = {"processing_seconds": 1.5, **batch}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": providers}))
    emu.start()
    return emu


@pytest.fixture
def emu_factory() -> Iterator[list[EmulatorThread]]:
    started: list[EmulatorThread] = []
    yield started
    for emu in started:
        emu.stop()


def start_emulator(started: list[EmulatorThread], **batch: Any) -> EmulatorThread:
    emu = batch_emulator(**batch)
    started.append(emu)
    return emu


def write_config(
    path: Path,
    emu: EmulatorThread,
    provider: str = "alpha",
    *,
    job: dict[str, Any] | None = None,
    **provider_extra: Any,
) -> Path:
    """One route (MODEL) to `provider`, with the Batch API poll sped up for the tests."""
    data: dict[str, Any] = {
        "providers": [
            {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")},
            {"name": "gamma", "kind": "anthropic", "base_url": emu.base_url("gamma")},
        ],
        "routes": [{"model": MODEL, "targets": [f"{provider}:{MODELS[provider]}"]}],
        "settings": {"concurrency": 8, "retry": {"max_attempts": 3, "base_delay": 0.05, "max_delay": 0.2}},
        "prices": {MODELS[provider]: PRICES[MODELS[provider]]},  # a price no route uses is refused
        "job": {"batch_poll": POLL, **(job or {})},
    }
    for p in data["providers"]:
        if p["name"] == provider:
            p.update(provider_extra)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def batches(emu: EmulatorThread, provider: str = "alpha") -> dict[str, int]:
    stats: dict[str, int] = emu.stats()["providers"][provider]["batches"]
    return stats


def live_admitted(emu: EmulatorThread) -> int:
    return sum(int(p["admitted"]) for p in emu.stats()["providers"].values())


def command(cli: Cli, n: int, cfg: Path, *extra: str) -> tuple[str, ...]:
    src = write_input(cli.cwd / "in.jsonl", n)
    out = cli.cwd / "out.jsonl"
    return ("run", str(src), "--config", str(cfg), "--output", str(out), "--mode", "batch-api", *extra)


def events(stdout: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in stdout.splitlines() if line.strip()]


def run_ok(cli: Cli, args: tuple[str, ...], code: int = 0) -> subprocess.CompletedProcess[str]:
    """Run to the end; `code` 4 where items are expected to fail (finished with failed items)."""
    done = cli.run(*args)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    return done


@pytest.mark.slow  # batch polling over several runs
@pytest.mark.parametrize("provider", ["alpha", "gamma"])
def test_completed_batch_gives_the_live_out_format_at_the_batch_price(
    cli: Cli, emu_factory: list[EmulatorThread], provider: str
) -> None:
    emu = start_emulator(emu_factory)
    n = 12
    cfg = write_config(cli.cwd / "gw.yaml", emu, provider)
    done = run_ok(cli, command(cli, n, cfg, "--progress", "json"))
    names = [e["event"] for e in events(done.stdout)]
    assert names[0] == "started"
    assert names[-1] == "finished"
    assert names.count("batch_submitted") == 1
    assert names.count("batch_ended") == 1
    assert any(e.get("batches", {}).get("open") == 1 for e in events(done.stdout) if e["event"] == "progress")

    stats = batches(emu, provider)
    assert (stats["created"], stats["completed"], stats["requests_succeeded"]) == (1, 1, n)
    assert live_admitted(emu) == 0  # nothing went live
    rows = read_jsonl(cli.cwd / "out.jsonl")
    assert ids_once(rows) == expected_ids(n)
    for row in rows:
        assert row["error"] is None
        assert row["provider"] == provider
        assert row["attempts"] == 1
        assert row["response"]["status_code"] == 200
        assert row["response"]["body"]["object"] == "chat.completion"
        assert row["usage"]["total_tokens"] > 0

    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["status"] == "completed"
    assert report["success_count"] == n
    b = report["batches"]
    assert (b["submitted"], b["resumed"], b["ended"], b["items_succeeded"]) == (1, 0, {"completed": 1}, n)
    assert (b["resubmitted_items"], b["sent_live_items"]) == (0, 0)
    price = PRICES[MODELS[provider]]
    live = (
        sum(
            row["usage"]["prompt_tokens"] * price["input"]
            + row["usage"]["completion_tokens"] * price["output"]
            for row in rows
        )
        / 1e6
    )
    assert b["cost_usd"] == pytest.approx(live / 2, abs=2e-6)  # the default 50 % batch discount
    assert b["live_cost_usd"] == pytest.approx(live, abs=2e-6)
    assert report["cost_split"]["batch_saving_usd"] == pytest.approx(b["saving_usd"])
    assert report["providers"][provider]["batch_cost_usd"] == pytest.approx(b["cost_usd"], abs=1e-6)
    assert report["providers"][provider]["live_cost_usd"] == pytest.approx(0.0, abs=1e-6)
    assert report["cost_usd"] == pytest.approx(b["cost_usd"], abs=1e-6)
    served = report["providers"][provider]  # the provider that served the batch shows its items
    assert (served["request_count"], served["batch_items"], served["batch_succeeded"]) == (n, n, n)
    assert served["success_count"] == n  # its batches' items count as its requests
    assert served["prompt_tokens"] == sum(row["usage"]["prompt_tokens"] for row in rows)
    assert served["completion_tokens"] == sum(row["usage"]["completion_tokens"] for row in rows)
    assert all(not key.startswith("_") for p in report["providers"].values() for key in p)
    (cells,) = [line.split() for line in render_summary(report).splitlines() if line.split()[0] == provider]
    assert (cells[1], cells[-1]) == (str(n), str(n))  # requests (all of them in batches), in batches


def test_failed_validation_fails_the_items_with_the_reason(
    cli: Cli, emu_factory: list[EmulatorThread]
) -> None:
    emu = start_emulator(emu_factory, fail_validation=True)
    n = 6
    cfg = write_config(cli.cwd / "gw.yaml", emu)
    run_ok(cli, command(cli, n, cfg, "--progress", "quiet"), code=4)
    stats = batches(emu)
    assert (stats["created"], stats["failed"], stats["requests_processed"]) == (1, 1, 0)
    assert live_admitted(emu) == 0
    rows = read_jsonl(cli.cwd / "out.jsonl")
    assert ids_once(rows) == expected_ids(n)
    assert {row["error"]["code"] for row in rows} == {"invalid_file"}
    assert all(row["error"]["message"].startswith("batch failed validation") for row in rows)
    assert len(read_jsonl(cli.cwd / "out.jsonl.errors.jsonl")) == n
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["failed_count"] == n
    assert report["batches"]["ended"] == {"failed": 1}
    assert report["batches"]["items_failed"] == n


@pytest.mark.slow  # batch polling over several runs
def test_expired_batches_keep_partial_results_and_the_rest_finishes(
    cli: Cli, emu_factory: list[EmulatorThread]
) -> None:
    # Each batch expires halfway: the first one's leftovers go into a second batch, whose own
    # leftovers (batched twice already) are sent live.
    emu = start_emulator(emu_factory, processing_seconds=2.0, expire_after_seconds=1.0)
    n = 10
    cfg = write_config(cli.cwd / "gw.yaml", emu)
    run_ok(cli, command(cli, n, cfg, "--progress", "quiet"))
    stats = batches(emu)
    assert (stats["created"], stats["expired"]) == (2, 2)
    batched = stats["requests_succeeded"]
    assert 0 < batched < n
    rows = read_jsonl(cli.cwd / "out.jsonl")
    assert ids_once(rows) == expected_ids(n)
    assert all(row["error"] is None for row in rows)
    assert live_admitted(emu) == n - batched  # only the leftovers of the second batch went live
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    b = report["batches"]
    assert b["ended"] == {"expired": 2}
    assert b["items_succeeded"] == batched
    assert b["sent_live_items"] == n - batched
    assert b["resubmitted_items"] == n - sum(
        1 for row in rows if row["attempts"] == 1 and row["latency_ms"] > 900
    )


@pytest.mark.slow  # batch polling over several runs
def test_creation_refused_with_429_waits_for_the_quota(cli: Cli, emu_factory: list[EmulatorThread]) -> None:
    # One batch of three fits the enqueued-token quota, two do not: the second is refused (429)
    # until the first has ended, then created.
    emu = start_emulator(emu_factory, processing_seconds=1.0, enqueued_token_limit=100)
    n = 6
    cfg = write_config(cli.cwd / "gw.yaml", emu, batch_max_requests=3)
    run_ok(cli, command(cli, n, cfg, "--progress", "quiet"))
    stats = batches(emu)
    assert stats["created"] == 2
    assert stats["completed"] == 2
    assert stats["refused"] >= 1
    assert live_admitted(emu) == 0
    rows = read_jsonl(cli.cwd / "out.jsonl")
    assert ids_once(rows) == expected_ids(n)
    per_batch = sum(row["usage"]["prompt_tokens"] for row in rows) / 2
    assert per_batch <= 100 < 2 * per_batch  # the test's premise: one batch fits the quota, two do not
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["batches"]["creation_refused"] == stats["refused"]
    assert report["batches"]["sent_live_items"] == 0


@pytest.mark.slow  # batch polling over several runs
def test_oversize_input_is_split_into_several_batches(cli: Cli, emu_factory: list[EmulatorThread]) -> None:
    emu = start_emulator(emu_factory, processing_seconds=1.0, max_requests=4)  # the provider's own limit
    n = 10
    cfg = write_config(cli.cwd / "gw.yaml", emu, batch_max_requests=4)
    run_ok(cli, command(cli, n, cfg, "--progress", "quiet"))
    stats = batches(emu)
    assert (stats["created"], stats["completed"], stats["rejected"]) == (3, 3, 0)  # 4 + 4 + 2
    assert stats["requests_succeeded"] == n
    assert ids_once(read_jsonl(cli.cwd / "out.jsonl")) == expected_ids(n)
    assert orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())["batches"]["submitted"] == 3


@pytest.mark.slow  # batch polling over several runs
def test_cancel_keeps_partial_results_and_a_later_run_finishes(
    cli: Cli, emu_factory: list[EmulatorThread]
) -> None:
    emu = start_emulator(emu_factory, processing_seconds=10.0)  # room for the cancel on a loaded machine
    n = 10
    cfg = write_config(cli.cwd / "gw.yaml", emu)
    args = command(cli, n, cfg, "--progress", "json")
    proc = cli.start(*args)
    wait_for(lambda: batches(emu)["requests_processed"] >= 3, "the batch to be under way")
    job = cli.status()["job"]
    cancelled = cli.run("cancel", job)
    assert cancelled.returncode == 0, cancelled.stderr
    code, stdout, stderr = finish(proc)
    assert code == 130, stderr
    assert events(stdout)[-1]["reason"] == "cancelled"
    stats = batches(emu)
    assert (stats["created"], stats["cancelled"]) == (1, 1)
    kept = stats["requests_succeeded"]
    assert 3 <= kept < n
    partial = read_jsonl(cli.cwd / "out.jsonl")
    assert len(ids_once(partial)) == kept  # every answer the batch gave before the cancel is kept
    status = cli.status(job)
    assert (status["state"], status["stop_reason"]) == ("stopped", "cancelled")
    assert (status["succeeded"], status["pending"]) == (kept, n - kept)
    assert live_admitted(emu) == 0

    again = cli.run("cancel", job)  # nothing runs now: the stored job is cancelled again, idempotent
    assert again.returncode == 0, again.stderr
    assert batches(emu)["created"] == 1

    run_ok(cli, args)  # a later run submits only the rest
    stats = batches(emu)
    assert (stats["created"], stats["completed"], stats["requests_succeeded"]) == (2, 1, n)
    assert ids_once(read_jsonl(cli.cwd / "out.jsonl")) == expected_ids(n)
    assert cli.status(job)["state"] == "completed"


@pytest.mark.slow  # batch polling over several runs
def test_kill_9_after_submission_resumes_polling_the_same_batch(
    cli: Cli, emu_factory: list[EmulatorThread]
) -> None:
    emu = start_emulator(emu_factory, processing_seconds=3.0)
    n = 12
    cfg = write_config(cli.cwd / "gw.yaml", emu)
    args = command(cli, n, cfg, "--progress", "json")
    proc = cli.start(*args)
    assert proc.stdout is not None
    for line in proc.stdout:  # the batch is recorded in the job store before this event
        if orjson.loads(line)["event"] == "batch_submitted":
            break
    else:
        raise AssertionError(f"no batch_submitted event; stderr: {proc.communicate()[1]}")
    kill_hard(proc)
    assert batches(emu)["created"] == 1
    assert (cli.cwd / "out.jsonl").read_bytes() == b""  # appended as results commit: none yet
    assert cli.status()["state"] == "interrupted"

    done = run_ok(cli, args)
    names = [e["event"] for e in events(done.stdout)]
    assert "batch_resumed" in names
    assert "batch_submitted" not in names
    stats = batches(emu)
    assert (stats["created"], stats["completed"], stats["requests_succeeded"]) == (1, 1, n)  # never twice
    assert live_admitted(emu) == 0
    rows = read_jsonl(cli.cwd / "out.jsonl")
    assert ids_once(rows) == expected_ids(n)
    assert all(row["error"] is None and row["attempts"] == 1 for row in rows)
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["batches"]["resumed"] == 1
    assert report["batches"]["submitted"] in (0, 1)  # the killed run's figures may be lost with it
    assert report["success_count"] == n


@pytest.mark.slow  # batch polling over several runs
def test_cancel_after_a_kill_cancels_the_recorded_batch(cli: Cli, emu_factory: list[EmulatorThread]) -> None:
    emu = start_emulator(emu_factory, processing_seconds=8.0)  # the cancel cuts it short
    n = 10
    cfg = write_config(cli.cwd / "gw.yaml", emu)
    proc = cli.start(*command(cli, n, cfg, "--progress", "json"))
    assert proc.stdout is not None
    for line in proc.stdout:
        if orjson.loads(line)["event"] == "batch_submitted":
            break
    kill_hard(proc)
    job = cli.status()["job"]
    done = cli.run("cancel", job)  # no run holds the job: the command cancels the recorded batch itself
    assert done.returncode == 0, done.stderr
    assert "cancelled 1 batches" in done.stdout
    stats = batches(emu)
    assert (stats["created"], stats["cancelled"]) == (1, 1)
    kept = stats["requests_succeeded"]  # processed before the cancel (the emulator works in real time)
    assert kept < n
    rows = read_jsonl(cli.cwd / "out.jsonl")
    assert len(ids_once(rows)) == kept  # the partial results reached OUT
    assert all(row["error"] is None for row in rows)
    status = cli.status(job)
    assert (status["state"], status["stop_reason"], status["pending"]) == ("stopped", "cancelled", n - kept)
    report = cli.report(job)
    assert report["batches"]["ended"] == {"cancelled": 1}
    assert live_admitted(emu) == 0


@pytest.mark.slow
def test_batch_answers_failing_the_output_check_are_listed_invalid_never_kept(
    cli: Cli, emu_factory: list[EmulatorThread]
) -> None:
    emu = start_emulator(emu_factory)
    n = 12
    mood = {0: "positive", 1: "negative", 2: "neutral"}  # the emulator answers "neutral" to the third
    src = write_input(cli.cwd / "in.jsonl", n, lambda i: mood[i % 3])
    cfg = write_config(cli.cwd / "gw.yaml", emu, job={"validate_regex": "positive|negative"})
    out = cli.cwd / "out.jsonl"
    run_ok(
        cli,
        ("run", str(src), "--config", str(cfg), "--output", str(out), "--mode", "batch-api", "-q"),
        code=4,
    )
    stats = batches(emu)
    assert (stats["created"], stats["requests_succeeded"]) == (1, n)  # asked once, in the batch
    assert live_admitted(emu) == 0
    neutral = {f"item-{i:05d}" for i in range(n) if i % 3 == 2}
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    for row in rows:
        if row["custom_id"] in neutral:
            assert row["error"]["code"] == "invalid_output"
            assert "neutral" in row["error"]["message"]
        else:
            assert row["error"] is None
    assert {r["custom_id"] for r in read_jsonl(cli.cwd / "out.jsonl.errors.jsonl")} == neutral
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    assert report["invalid_count"] == len(neutral)
    assert {item["custom_id"] for item in report["invalid_outputs"]} == neutral
    assert report["success_count"] == n - len(neutral)
    # the refused answers were billed at the batch price: all twelve are in the cost
    assert report["batches"]["cost_usd"] == pytest.approx(report["cost_usd"], abs=1e-9)
    assert report["token_usage"]["retry_extra_tokens"] > 0
