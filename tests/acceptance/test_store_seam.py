"""The job store through one seam: `batchgate cancel` and `batchgate.Job` open the store a URL or
path names (SQLite or Postgres), and `Job` honours the config's `job.store` as the CLI does."""

from __future__ import annotations

from pathlib import Path

import pytest

import batchgate
from batchgate.emulator import EmulatorThread
from batchgate.jobs.engine import CANCEL_BLOB
from batchgate.jobs.job_setup import job_id_for
from batchgate.jobs.store.postgres import PgJobStore

from .conftest import PG_SECRET as SECRET
from .harness import Cli, finish, gateway_config, provider_totals, wait_for, write_input

pytestmark = [pytest.mark.acceptance, pytest.mark.postgres]


@pytest.mark.slow
async def test_cancel_works_on_a_postgres_store(pg_cli: Cli, emu: EmulatorThread) -> None:
    cli, n = pg_cli, 12
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    out = cli.cwd / "out.jsonl"
    made = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--submit-only")
    assert made.returncode == 0, made.stderr
    job = cli.status()["job"]
    assert cli.store_url is not None
    holder = await PgJobStore.open(cli.store_url)  # a run elsewhere holds the job
    try:
        with holder.lock_job(job_id_for(src, out)):
            held = cli.run("cancel", job, "--wait", "0")
        assert held.returncode != 0
        assert "still running" in held.stderr
        assert await holder.get_blob(job, CANCEL_BLOB) == b"1"  # the request stays for that run
    finally:
        await holder.close()
    done = cli.run("cancel", job)
    assert done.returncode == 0, done.stderr
    assert f"job {job}: stopped (cancelled)" in done.stdout
    assert "resume with: batchgate resume" in done.stdout
    status = cli.status(job)
    assert (status["state"], status["stop_reason"], status["pending"]) == ("stopped", "cancelled", n)
    assert provider_totals(emu)["admitted"] == 0
    assert not (cli.cwd / ".batchgate").exists()  # nothing went to a SQLite file
    assert all(SECRET not in text for text in cli.transcript)


@pytest.mark.slow
def test_cancel_stops_a_run_holding_the_job_on_postgres(pg_cli: Cli, emu: EmulatorThread) -> None:
    cli, n = pg_cli, 400
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=2, hedge=False)
    proc = cli.start("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "--progress", "quiet")
    wait_for(lambda: provider_totals(emu)["completed"] >= 5, "the run to be under way")
    job = cli.status()["job"]
    done = cli.run("cancel", job, "--wait", "60")  # no pid to signal: the run reads the request
    assert done.returncode == 0, done.stderr
    assert "asked it (through the store) to cancel" in done.stderr
    code, _, stderr = finish(proc)
    assert code == 130, stderr
    status = cli.status(job)
    assert (status["state"], status["stop_reason"]) == ("stopped", "cancelled")
    assert 0 < status["succeeded"] < n
    assert status["succeeded"] + status["pending"] == n
    assert all(SECRET not in text for text in cli.transcript)


async def test_job_opens_a_postgres_url_and_honours_job_store(
    pg_cli: Cli, emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, n = pg_cli, 8
    monkeypatch.chdir(cli.cwd)
    assert cli.store_url is not None
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    report = await batchgate.Job(src, config=cfg, output=cli.cwd / "a.jsonl", store=cli.store_url).arun()
    assert report["success_count"] == n
    configured = gateway_config(cli.cwd / "pg.yaml", emu, job={"store": cli.store_url})
    again = await batchgate.Job(src, config=configured, output=cli.cwd / "b.jsonl").arun()
    assert again["success_count"] == n
    kept = [p.name for p in cli.cwd.iterdir() if not p.name.endswith((".jsonl", ".json", ".yaml"))]
    assert kept == []  # no SQLite file named after the URL, no default store
    store = await PgJobStore.open(cli.store_url)
    try:
        jobs = {Path(j.output_path).name: j.status for j in await store.list_jobs()}
    finally:
        await store.close()
    assert jobs == {"a.jsonl": "completed", "b.jsonl": "completed"}
