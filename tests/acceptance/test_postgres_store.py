"""The CLI on a Postgres job store: `run --store postgresql://…` completes the README-style job,
a kill -9 and `resume` lose nothing and resend no succeeded item, Ctrl-C prints a resume command
without the password and that command finishes the job, `job.store` in the config works, and a
run held by another (an advisory lock) is refused."""

from __future__ import annotations

import re
import shlex
import signal
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread
from batchgate.jobs.job_setup import job_id_for
from batchgate.jobs.store.postgres import PgJobStore

from .conftest import PG_SECRET as SECRET
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

pytestmark = [pytest.mark.acceptance, pytest.mark.postgres]


@pytest.mark.slow  # a run stopped, then resumed
def test_kill_9_then_resume_on_postgres(pg_cli: Cli, emu: EmulatorThread) -> None:
    cli, n = pg_cli, 300
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=16, hedge=False)  # every request counted
    out = cli.cwd / "out.jsonl"
    proc = cli.start("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet")
    wait_for(lambda: provider_totals(emu)["completed"] >= 90, "90 answers before the kill")
    kill_hard(proc)
    wait_for(lambda: provider_totals(emu)["in_flight"] == 0, "the killed run's requests to drain")
    before = provider_totals(emu)

    status = cli.status()
    assert status["state"] == "interrupted"  # the killed session took its lock with it
    stored = status["succeeded"]
    assert 0 < stored <= before["completed"] < n

    done = cli.run("resume", status["job"], "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    after = provider_totals(emu)
    assert after["admitted"] - before["admitted"] == n - stored  # no succeeded item sent again
    # only answers the kill lost are sent again; each provider counts its own duplicates, so one
    # re-sent to the route's other provider (paced at the limits its headers report) is not seen
    assert after["duplicates"] <= before["completed"] - stored
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    assert all(row["error"] is None and row["response"]["status_code"] == 200 for row in rows)
    report = cli.report(status["job"])
    assert (report["status"], report["success_count"], report["failed_count"]) == ("completed", n, 0)
    assert SECRET not in "".join(cli.transcript)


@pytest.mark.slow  # a run stopped, then resumed
def test_ctrl_c_prints_a_resume_command_that_finishes_the_job(
    pg_cli: Cli, emu: EmulatorThread, tmp_path: Path
) -> None:
    cli, n = pg_cli, 200
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=8)
    out = cli.cwd / "out.jsonl"
    proc = cli.start("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet")
    wait_for(lambda: provider_totals(emu)["completed"] >= 40, "40 answers before Ctrl-C")
    code, _, stderr = cli.finish(proc, signal.SIGINT)
    assert code == 130, stderr
    match = re.search(r"resume with: (batchgate resume \S+ --store \S+)", stderr)
    assert match, stderr
    hint = shlex.split(match.group(1))
    assert SECRET not in stderr
    done = cli.run(*hint[1:], "--progress", "quiet", store=False)  # exactly the printed command
    assert done.returncode == 0, done.stderr
    assert ids_once(read_jsonl(out)) == expected_ids(n)
    assert provider_totals(emu)["duplicates"] == 0


@pytest.mark.slow
async def test_job_store_from_the_config_and_the_run_lock(pg_cli: Cli, emu: EmulatorThread) -> None:
    cli, n = pg_cli, 40
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, job={"store": cli.store_url})
    out = cli.cwd / "out.jsonl"
    assert cli.store_url is not None
    holder = await PgJobStore.open(cli.store_url)  # another run, as far as the CLI can tell
    try:
        with holder.lock_job(job_id_for(src, out)):
            refused = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), store=False)
    finally:
        await holder.close()
    assert refused.returncode == 2
    assert "locked by another batchgate run" in refused.stderr
    assert provider_totals(emu)["admitted"] == 0
    done = cli.run(
        "run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet", store=False
    )
    assert done.returncode == 0, done.stderr
    assert not (cli.cwd / ".batchgate").exists()  # nothing went to the default SQLite file
    listing = cli.run("jobs")  # --store names the same Postgres schema
    assert "completed" in listing.stdout
    assert cli.status()["succeeded"] == n
