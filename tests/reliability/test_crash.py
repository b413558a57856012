"""Crashes: `batchgate run` killed with SIGKILL at seeded random moments twenty times on one job,
resumed after each; SIGTERM and SIGINT stop it gracefully; a second run of a running job is
refused; a job whose process died between creating the job and storing its tasks still runs
every task. The emulator lives in the test process, so its counters survive every kill."""

from __future__ import annotations

import asyncio
import functools
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acceptance.harness import Cli, one_error_line, read_jsonl, wait_for
from batchgate.config import load_config
from batchgate.emulator import EmulatorThread
from batchgate.jobs.input.read import validate_input
from batchgate.jobs.job_setup import RunRequest, job_id_for
from batchgate.jobs.store.options import JobOptions
from batchgate.jobs.store.protocol import JobRecord
from batchgate.jobs.store.sqlite import SqliteJobStore

from .helpers import (
    check_store_consistent,
    emu_provider,
    emu_totals,
    gw_provider,
    start_emulator,
    write_config,
    write_input,
)

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

CONCURRENCY = 4


@pytest.fixture
def emu() -> Iterator[EmulatorThread]:
    thread = start_emulator(
        [emu_provider("alpha", latency_ms=60), emu_provider("gamma", "anthropic", latency_ms=60)]
    )
    try:
        yield thread
    finally:
        thread.stop()


def _setup(cli: Cli, emu: EmulatorThread, n: int) -> tuple[list[str], Path]:
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = write_config(
        cli.cwd / "gw.yaml",
        [gw_provider(emu, "alpha"), gw_provider(emu, "gamma", "anthropic")],
        concurrency=CONCURRENCY,
        hedge=False,  # every request is counted: a hedge under load would look like a re-send
    )
    out = cli.cwd / "out.jsonl"
    args = ["run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet"]
    return args, out


def _check_out(out: Path, n: int) -> None:
    rows = read_jsonl(out)
    ids = [row["custom_id"] for row in rows]
    assert len(ids) == len(set(ids)), "a custom_id appears twice in OUT"
    assert set(ids) == {f"item-{i:05d}" for i in range(n)}
    assert all(row["error"] is None and row["response"]["status_code"] == 200 for row in rows)


def _sent_or_ended(emu: EmulatorThread, before: int, proc: subprocess.Popen[str]) -> bool:
    return emu_totals(emu)["admitted"] != before or proc.poll() is not None


def crash_loop(cli: Cli, emu: EmulatorThread, args: list[str], kills: int, seed: int) -> dict[str, int]:
    """SIGKILL the run `kills` times at seeded random moments, resuming after each; returns figures."""
    rng = random.Random(seed)
    figures = {"kills": 0, "finished_early": 0, "killed_in_startup": 0}
    for k in range(kills):
        before = emu_totals(emu)["admitted"]
        proc = cli.start(*args)
        if k % 4 == 0:  # some kills land in start-up: validation, job creation, task loading
            time.sleep(rng.uniform(0.1, 1.0))
            figures["killed_in_startup"] += emu_totals(emu)["admitted"] == before
        else:  # the others while requests are in flight
            wait_for(
                functools.partial(_sent_or_ended, emu, before, proc), "the run to send something", every=0.01
            )
            time.sleep(rng.uniform(0.2, 1.0))
        if proc.poll() is not None:
            figures["finished_early"] += 1
            code, _, err = cli.finish(proc)
            assert code == 0, err
            continue
        cli.finish(proc, signal.SIGKILL)
        figures["kills"] += 1
        wait_for(lambda: emu_totals(emu)["in_flight"] == 0, "the killed run's requests to drain")
        status = cli.run("status", "--json")
        if status.returncode == 0:  # killed before the job existed: a clean "no job" error instead
            assert '"state"' in status.stdout
        else:
            one_error_line(status.stderr)
    done = cli.run(*args)
    assert done.returncode == 0, done.stderr
    return figures


@pytest.mark.timeout(600)  # twenty runs killed and one to the end: over 120 s on a loaded machine
def test_twenty_sigkills_in_a_row_lose_nothing_and_resend_no_success(cli: Cli, emu: EmulatorThread) -> None:
    n = 500
    args, out = _setup(cli, emu, n)
    figures = crash_loop(cli, emu, args, kills=20, seed=20240611)
    assert figures["kills"] >= 15, figures  # the job outlived most kills: they really interrupted it
    _check_out(out, n)
    totals = emu_totals(emu)
    # a succeeded item is never sent again; only items in flight at a kill may be (≤ concurrency each)
    assert totals["duplicates"] <= CONCURRENCY * figures["kills"], (totals, figures)
    status = check_store_consistent(cli, n)
    assert status["state"] == "completed"
    assert status["succeeded"] == n
    # every item reached the provider at least once, and at most once more per kill in flight
    assert n <= totals["completed"] <= n + CONCURRENCY * figures["kills"]


def test_killed_between_job_creation_and_task_loading_still_runs_every_task(
    cli: Cli, emu: EmulatorThread
) -> None:
    """The job row and its tasks are written in separate transactions: a death in between must
    not leave a job that 'completes' with no tasks."""

    n = 30
    args, out = _setup(cli, emu, n)
    src, cfg_path = cli.cwd / "in.jsonl", cli.cwd / "gw.yaml"
    req = RunRequest(input_path=src, config_path=cfg_path, output_path=out, store_path=cli.store)
    load_config(cfg_path)

    async def create_job_only() -> None:

        cli.store.parent.mkdir(mode=0o700, exist_ok=True)
        store = await SqliteJobStore.open(cli.store)
        try:
            report = validate_input(src)
            now = time.time()
            await store.create_job(
                JobRecord(
                    job_id=job_id_for(src, out), input_path=str(src.resolve()), input_sha256=report.sha256,
                    output_path=str(out.resolve()), config_path=str(cfg_path.resolve()), status="created",
                    stop_reason=None, created_at=now, updated_at=now, task_total=report.task_count,
                    options=JobOptions(errors_path=str(req.errors_file.resolve())),
                )
            )  # fmt: skip
        finally:
            await store.close()

    asyncio.run(create_job_only())
    done = cli.run(*args)
    assert done.returncode == 0, done.stderr
    assert out.exists()
    _check_out(out, n)
    assert check_store_consistent(cli, n)["succeeded"] == n


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_stop_gracefully_and_resume_cleanly(
    cli: Cli, emu: EmulatorThread, sig: signal.Signals
) -> None:
    n = 150
    args, out = _setup(cli, emu, n)
    proc = cli.start(*args)
    wait_for(lambda: emu_totals(emu)["completed"] >= 20, "20 answers before the signal")
    code, stdout, stderr = cli.finish(proc, sig)
    assert code == 130, stderr
    assert "Traceback" not in stderr
    job = cli.status()["job"]
    assert f"batchgate resume {job}" in stderr + stdout
    status = check_store_consistent(cli, n)
    assert status["state"] == "stopped"
    assert 0 < status["succeeded"] < n
    # graceful: whatever was in flight finished and was stored, so resuming resends no success
    stored = status["succeeded"]
    before = emu_totals(emu)
    assert before["in_flight"] == 0
    assert before["completed"] == stored
    done = cli.run(*args)
    assert done.returncode == 0, done.stderr
    after = emu_totals(emu)
    assert after["duplicates"] == 0
    assert after["admitted"] - before["admitted"] == n - stored
    _check_out(out, n)
    assert check_store_consistent(cli, n)["state"] == "completed"


def test_a_second_run_of_a_running_job_is_refused(cli: Cli, emu: EmulatorThread) -> None:
    n = 200
    args, out = _setup(cli, emu, n)
    first = cli.start(*args)
    wait_for(lambda: emu_totals(emu)["admitted"] >= 10, "the first run to send")
    second = cli.run(*args)
    assert second.returncode != 0
    line = one_error_line(second.stderr)
    assert "locked" in line
    assert first.poll() is None  # the first run was left alone
    code, _, err = cli.finish(first)
    assert code == 0, err
    _check_out(out, n)
    assert emu_totals(emu)["duplicates"] == 0
