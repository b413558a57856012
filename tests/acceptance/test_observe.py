"""Watching a run from outside, as a user does: `batchgate run --metrics-port` serves Prometheus
metrics that are scraped while the run sends and once its last item is done (kept up by
`--metrics-linger`), parsed with prometheus_client's own text parser, and checked against the job's
report; `--log-format json` writes one JSON object per line with the job's and the providers'
state changes, carrying job, task and attempt ids and never a prompt."""

from __future__ import annotations

import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from acceptance.harness import Cli, read_jsonl, wait_for
from batchgate.emulator import EmulatorThread
from reliability.helpers import MODEL, emu_provider, gw_provider, start_emulator, write_config, write_input

pytestmark = pytest.mark.acceptance

RIGHT_KEY = "sk-observe-right-1f2e3d"
WRONG_KEY = "sk-observe-wrong-9a8b7c"
PRICES = {MODEL: {"input": 1.5, "output": 6.0}, "m-locked": {"input": 1.5, "output": 6.0}}
LIMITS = {"rpm": 60_000, "tpm": 10_000_000}  # declared: the pools have dimensions to report
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample of `/metrics`, as prometheus_client's parser reads them."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(v for (n, lb), v in samples.items() if n == name and set(labels.items()) <= set(lb))


def metrics_url(proc: subprocess.Popen[str]) -> str:
    """The address the run prints first on stderr (`--metrics-port 0` picks a free port)."""
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("batchgate: metrics at http://127.0.0.1:"), line
    return line.split(" at ", 1)[1].strip()


@pytest.fixture
def flaky_emu() -> Iterator[EmulatorThread]:
    """alpha answers slowly (the run lasts seconds) with 5xx and 429 faults; `locked` wants a key
    the config does not have, so its items fail for good."""
    emu = start_emulator(
        [
            emu_provider("alpha", latency_ms=120, faults={"server_error": 0.15, "rate_limit_no_hint": 0.05}),
            emu_provider("locked", latency_ms=5, api_key=RIGHT_KEY),
        ]
    )
    try:
        yield emu
    finally:
        emu.stop()


def _job(cli: Cli, emu: EmulatorThread, routes: list[dict[str, Any]], providers: list[str]) -> list[str]:
    cfg = write_config(
        cli.cwd / "gw.yaml",
        [gw_provider(emu, p, api_key_env="BG_OBSERVE_KEY", limits=LIMITS) for p in providers],
        routes,
        concurrency=2,
        max_attempts=4,
        extra={"prices": PRICES},
    )
    data = yaml.safe_load(cfg.read_text())  # the locked provider's items fail one by one, each
    data["settings"]["circuit"] = {"take_out_after": 0}  # with its 401 (it is never taken out)
    cfg.write_text(yaml.safe_dump(data))
    cli.env = {"BG_OBSERVE_KEY": WRONG_KEY}
    src = cli.cwd / "in.jsonl"
    write_input(cli.cwd / "a.jsonl", 30)
    write_input(cli.cwd / "b.jsonl", 4, model="m-locked", start=30)
    src.write_bytes((cli.cwd / "a.jsonl").read_bytes() + (cli.cwd / "b.jsonl").read_bytes())
    return ["run", str(src), "--config", str(cfg), "--output", str(cli.cwd / "out.jsonl")]


@pytest.mark.slow  # a run scraped while it runs
def test_metrics_scraped_during_and_after_the_run_agree_with_the_report(
    cli: Cli, flaky_emu: EmulatorThread
) -> None:
    routes = [{"model": MODEL, "targets": ["alpha"]}, {"model": "m-locked", "targets": ["locked"]}]
    args = _job(cli, flaky_emu, routes, ["alpha", "locked"])
    proc = cli.start(*args, "--progress", "quiet", "--metrics-port", "0", "--metrics-linger", "60")
    url = metrics_url(proc)
    report_file = cli.cwd / "out.jsonl.report.json"

    def some_done() -> bool:
        return total(scrape(url), "batchgate_job_tasks", state="succeeded") >= 1

    wait_for(some_done, "a first item done")
    during = scrape(url)
    assert not report_file.exists()  # scraped while the run was sending
    assert total(during, "batchgate_job_running") == 1
    assert total(during, "batchgate_job_tasks") == 34  # every task in some state

    assert proc.stderr is not None
    while "stays up" not in (line := proc.stderr.readline()):  # the summary, then the linger's line
        assert line, "the run ended without lingering"
    after = scrape(url)
    code, _, err = cli.finish(proc, signal.SIGTERM)  # ends the linger; the run's own code stays
    assert code == 4, err
    report = orjson.loads(report_file.read_bytes())
    assert report["failed_count"] >= 4  # the locked provider's items, and perhaps an unlucky one

    job = {"job_id": report["batch_id"]}
    assert total(after, "batchgate_job_running", **job) == 0
    assert total(after, "batchgate_job_tasks", state="succeeded", **job) == report["success_count"]
    assert total(after, "batchgate_job_tasks", state="failed", **job) == report["failed_count"]
    assert total(after, "batchgate_job_tasks", state="pending", **job) == 0
    for name, p in report["providers"].items():
        lb = {"provider": name, **job}
        answered = p["success_count"] + p["error_count"]
        assert total(after, "batchgate_requests_sent_total", **lb) == p["request_count"], name
        assert total(after, "batchgate_requests_total", outcome="ok", **lb) == p["success_count"], name
        assert total(after, "batchgate_requests_total", **lb) == answered, name
        assert total(after, "batchgate_rate_limited_total", **lb) == p["rate_limited"], name
        assert total(after, "batchgate_retries_total", **lb) == p["retries"], name
        assert total(after, "batchgate_hedges_total", **lb) == p["hedged"], name
        assert total(after, "batchgate_tokens_total", direction="input", **lb) == p["prompt_tokens"], name
        assert total(after, "batchgate_tokens_total", direction="output", **lb) == p["completion_tokens"]
        assert total(after, "batchgate_wasted_tokens_total", **lb) == p["wasted_tokens"], name
        assert total(after, "batchgate_cost_usd_total", **lb) == pytest.approx(p["cost_usd"], abs=1e-6)
        assert total(after, "batchgate_request_duration_seconds_count", **lb) == answered, name
        assert total(after, "batchgate_request_duration_seconds_bucket", le="+Inf", **lb) == answered
        assert total(after, "batchgate_circuit_state", **lb) == 1  # exactly one state at a time
        for kind, n in p["errors_by_kind"].items():
            assert total(after, "batchgate_requests_total", outcome=kind, **lb) == n, (name, kind)
    alpha = {"provider": "alpha", **job}
    assert total(after, "batchgate_quota_limit_per_minute", dimension="requests", **alpha) > 0
    assert 0 < total(after, "batchgate_aimd_factor", **alpha) <= 1
    assert report["providers"]["alpha"]["retries"] > 0  # the faults were retried: counters were live
    assert report["providers"]["locked"]["errors_by_kind"] == {"authentication": 4}
    # counters only grow between the two scrapes
    for key, value in during.items():
        if key[0].endswith("_total") and key in after:
            assert after[key] >= value, key


@pytest.mark.slow
def test_json_logs_parse_line_by_line_and_tell_the_job_s_and_providers_state_changes(
    cli: Cli, tmp_path: Path
) -> None:
    emu = start_emulator(
        [
            emu_provider("down", latency_ms=5, faults={"server_error": 1.0}),
            emu_provider("beta", latency_ms=20),
            emu_provider("locked", latency_ms=5, api_key=RIGHT_KEY),
        ]
    )
    try:
        routes = [{"model": MODEL, "targets": ["down", "beta"]}, {"model": "m-locked", "targets": ["locked"]}]
        args = _job(cli, emu, routes, ["down", "beta", "locked"])
        done = cli.run(*args, "-q", "--log-format", "json", "--log-level", "debug")
    finally:
        emu.stop()
    assert done.returncode == 4, done.stderr
    assert read_jsonl(cli.cwd / "out.jsonl")  # the outputs are written as without logs
    events = [orjson.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    others = [line for line in done.stderr.splitlines() if line and not line.startswith("{")]
    assert all("retry exactly those" in line for line in others), others  # only the CLI's own hint
    for e in events:
        assert {"ts", "level", "logger", "event", "msg"} <= e.keys(), e
        assert e["logger"].startswith("batchgate."), e
    names = [e["event"] for e in events]
    assert names[0] == "job_started", names
    assert names[-1] == "job_finished", names
    job_id = events[0]["job"]
    assert all(e.get("job") == job_id for e in events), "every event carries the job id"
    failed = [e for e in events if e["event"] == "task_failed"]
    assert sorted(e["task"] for e in failed) == [f"item-{i:05d}" for i in range(30, 34)]
    assert {e["error"] for e in failed} == {"authentication"}
    opened = [e for e in events if e["event"] == "circuit_opened"]
    assert [e["provider"] for e in opened] == ["down"]  # once: it stays open for the run
    failovers = [e for e in events if e["event"] == "failover"]
    assert failovers, names
    assert all(e["previous"] == "down" and e["provider"] == "beta" for e in failovers)
    assert all(e["attempt"] >= 2 and e["task"].startswith("item-") for e in failovers)
    attempts = [e for e in events if e["event"] == "attempt_failed"]
    assert attempts
    assert all({"task", "attempt", "provider", "error"} <= e.keys() for e in attempts)
    text = done.stderr
    assert "echo this note" not in text  # no prompt
    assert WRONG_KEY not in text
    assert WRONG_KEY[3:] not in text
