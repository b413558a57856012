"""`batchgate worker` processes on one shared store (Postgres, and SQLite on one machine): a job
submitted with `run --submit-only` is run by two workers with every task sent and written exactly
once, and a worker killed with SIGKILL loses nothing: its chunks go back to the queue when its
lease expires and finish on the other worker, and no succeeded item is sent again."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread
from batchgate.jobs.store.postgres import PgJobStore
from batchgate.jobs.store.protocol import TaskState
from pgutil import fresh_schema

from .harness import (
    Cli,
    cli_under,
    expected_ids,
    gateway_config,
    ids_once,
    kill_hard,
    provider_totals,
    read_jsonl,
    wait_for,
    write_input,
)

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]  # worker processes, kills
CHUNK, LANES = 20, 2
WORKER_ARGS = ("--chunk-size", str(CHUNK), "--lanes", str(LANES), "--idle-max", "0.2", "--exit-when-idle")
SUMMARY = re.compile(r"(\d+) chunks, (\d+) results committed, (\d+) leases lost")


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def shared_cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cli]:
    with cli_under(tmp_path) as runner:
        if request.param == "sqlite":
            yield runner
            return
        with fresh_schema() as url:
            runner.store_url = url
            yield runner


@pytest.fixture
def pg_cli(tmp_path: Path) -> Iterator[Cli]:
    with fresh_schema() as url, cli_under(tmp_path) as runner:
        runner.store_url = url
        yield runner


def _submit(cli: Cli, emu: EmulatorThread, n: int) -> tuple[Path, Path]:
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=16, hedge=False)  # every request counted
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--submit-only")
    assert done.returncode == 0, done.stderr
    assert "submitted job" in done.stdout
    assert "batchgate worker" in done.stdout
    assert provider_totals(emu)["admitted"] == 0  # submitting sends nothing
    assert cli.status()["state"] == "submitted"
    return cfg, out


def _summary(stderr: str) -> tuple[int, int, int]:
    found = SUMMARY.search(stderr)
    assert found is not None, stderr
    chunks, committed, lost = (int(g) for g in found.groups())
    return chunks, committed, lost


def _counts(cli: Cli) -> dict[TaskState, int]:
    async def read() -> dict[TaskState, int]:
        assert cli.store_url is not None
        store = await PgJobStore.open(cli.store_url)
        try:
            (job,) = await store.list_jobs()
            return await store.counts(job.job_id)
        finally:
            await store.close()

    return asyncio.run(read())


def _worker(cli: Cli, cfg: Path, *extra: str) -> subprocess.Popen[str]:
    return cli.start("worker", "--config", str(cfg), *WORKER_ARGS, *extra)


def test_two_workers_run_every_task_exactly_once(shared_cli: Cli, emu: EmulatorThread) -> None:
    cli, n = shared_cli, 400
    cfg, out = _submit(cli, emu, n)
    procs = [_worker(cli, cfg), _worker(cli, cfg)]
    results = [cli.finish(p) for p in procs]
    assert all(code == 0 for code, _, _ in results), [err for _, _, err in results]
    summaries = [_summary(err) for _, _, err in results]
    assert sum(s[1] for s in summaries) == n  # every outcome committed once, by one worker
    assert all(s[2] == 0 for s in summaries)
    assert sum("wrote the output of" in err for _, _, err in results) == 1  # the last one writes it
    totals = provider_totals(emu)
    assert (totals["admitted"], totals["duplicates"]) == (n, 0)
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    assert all(row["error"] is None for row in rows)
    job = cli.status()["job"]
    report = cli.report(job)
    assert (report["status"], report["success_count"], report["failed_count"]) == ("completed", n, 0)


def test_a_killed_workers_chunks_finish_on_another_after_its_lease(pg_cli: Cli, emu: EmulatorThread) -> None:
    cli, n = pg_cli, 300
    cfg, out = _submit(cli, emu, n)
    doomed = _worker(cli, cfg, "--lease", "2")
    wait_for(lambda: provider_totals(emu)["completed"] >= 40, "40 answers before the kill")
    kill_hard(doomed)
    wait_for(lambda: provider_totals(emu)["in_flight"] == 0, "the killed worker's requests to drain")
    before = provider_totals(emu)
    status = cli.status()
    assert status["state"] == "with workers"
    stored = status["succeeded"]
    assert 0 < stored < n
    assert _counts(cli)[TaskState.RUNNING] > 0

    code, _, err = cli.finish(_worker(cli, cfg, "--lease", "2"))  # waits out the dead lease, then takes it
    assert code == 0, err
    assert _summary(err)[1] == n - stored
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    assert all(row["error"] is None for row in rows)
    after = provider_totals(emu)
    assert after["admitted"] - before["admitted"] == n - stored  # no succeeded item sent again
    # only answers the kill lost are sent again; each provider counts its own duplicates, so one
    # re-sent to the route's other provider (paced at the limits its headers report) is not seen
    assert after["duplicates"] <= before["completed"] - stored
    assert before["admitted"] - stored <= CHUNK * LANES  # at most the dead worker's leased tasks
    report = cli.report(status["job"])
    assert (report["status"], report["success_count"]) == ("completed", n)


def test_a_worker_killed_beside_another_loses_nothing(pg_cli: Cli, emu: EmulatorThread) -> None:
    """Both work the job; one is killed mid-job; the other finishes it, its dead chunks included."""
    cli, n = pg_cli, 300
    cfg, out = _submit(cli, emu, n)
    doomed = _worker(cli, cfg, "--lease", "2")
    survivor = _worker(cli, cfg, "--lease", "2")
    wait_for(lambda: provider_totals(emu)["completed"] >= 60, "60 answers before the kill")
    kill_hard(doomed)
    assert cli.status()["succeeded"] < n

    code, _, err = cli.finish(survivor)
    assert code == 0, err
    assert "wrote the output of" in err
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    assert all(row["error"] is None for row in rows)
    extra = provider_totals(emu)["admitted"] - n
    assert 0 <= extra <= CHUNK * LANES  # only what the dead worker held was sent again
    report = cli.report(cli.status()["job"])
    assert (report["status"], report["success_count"]) == ("completed", n)


def test_sigterm_stops_a_worker_and_puts_its_unsent_tasks_back(pg_cli: Cli, emu: EmulatorThread) -> None:
    cli, n = pg_cli, 200
    cfg, _ = _submit(cli, emu, n)
    proc = _worker(cli, cfg, "--concurrency", "2")
    wait_for(lambda: provider_totals(emu)["completed"] >= 10, "10 answers before the stop")
    code, _, err = cli.finish(proc, signal.SIGTERM)
    assert code == 0, err
    committed = _summary(err)[1]
    counts = _counts(cli)
    assert 0 < counts[TaskState.SUCCEEDED] == committed < n
    assert counts[TaskState.PENDING] == n - committed  # nothing left running under its leases
