"""One job spec behind every front door: `batchgate run` flags, `batchgate.Job(...)` and the YAML
`job:` section give a job its name, priority, metadata, scheduled start and callback through one
parser (one error text), the job remembers them, `status`, `jobs` and `report` show them (finding
the store through `--config` as `run` does), a future `not_before` holds the run on the clock
(nothing sent) until it is due, and the end is posted, signed, to the callback URL. The server's
door (`/v1/jobs`) has its own tests in tests/server (test_job_schedule, test_callbacks,
test_job_order)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from openai import OpenAI

import batchgate
from batchgate.cli import main
from batchgate.clock import LoopClock, TimerHandle, wall_time
from batchgate.config import JobSpec, load_config
from batchgate.config.job_spec import rfc3339
from batchgate.emulator import EmulatorThread
from batchgate.errors import JobSpecError
from batchgate.jobs.job_setup import RunRequest
from batchgate.jobs.runner import run_job
from batchgate.webhooks.signing import new_secret
from loopback import serving

from .harness import Cli, gateway_config, provider_totals, write_input

pytestmark = pytest.mark.acceptance
HOLD_S = 60.0  # a timer further ahead than this is the not_before wait: held by the test


class _Hooks:
    """Each POST a receiver got: its headers and body."""

    def __init__(self) -> None:
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.arrived = asyncio.Event()

    async def post(self, request: web.Request) -> web.Response:
        self.got.append((dict(request.headers), await request.read()))
        self.arrived.set()
        return web.Response(status=204)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/hook", self.post)
        return app


def _event(hooks: _Hooks, secret: str) -> dict[str, Any]:
    """The one delivery, verified by the official SDK as a receiver would."""
    [(headers, body)] = hooks.got
    event = OpenAI(api_key="unused", webhook_secret=secret).webhooks.unwrap(body, headers)
    return event.model_dump()


@pytest.mark.slow  # four CLI runs
async def test_run_flags_reach_status_jobs_and_report_and_the_end_is_posted(
    cli: Cli, emu: EmulatorThread
) -> None:
    secret = new_secret()
    cli.env["HOOK_SECRET"] = secret
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, job={"store": str(cli.store)})
    src = write_input(cli.cwd / "in.jsonl", 6)
    hooks = _Hooks()
    async with serving(hooks.app()) as base:
        done = await asyncio.to_thread(
            cli.run, "run", str(src), "--config", str(cfg), "--output", str(cli.cwd / "out.jsonl"),
            "--name", "nightly", "--priority", "high", "--metadata", "team=search", "--metadata", "run=7",
            "--not-before", "2020-01-01T00:00:00Z", "--callback-url", f"{base}/hook",
            "--callback-secret-env", "HOOK_SECRET", store=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "delivered" in done.stderr
    event = _event(hooks, secret)
    assert event["type"] == "batch.completed"
    status = orjson.loads(cli.run("status", "--json", "--config", str(cfg), store=False).stdout)
    assert (status["name"], status["priority"], status["metadata"]) == (
        "nightly", "high", {"team": "search", "run": "7"},
    )  # fmt: skip
    assert status["job"] == event["data"]["id"]
    assert status["callback_host"] == "127.0.0.1"  # the URL's host only: a URL may carry a token
    listed = cli.run("jobs", "--config", str(cfg), store=False).stdout
    assert f'{status["job"]} "nightly" (high; run=7, team=search)' in listed
    report = orjson.loads(cli.run("report", "--config", str(cfg), store=False).stdout)
    assert report["job"]["metadata"] == {"team": "search", "run": "7"}
    assert report["job"]["not_before"] == "2020-01-01T00:00:00Z"
    cancelled = cli.run("cancel", status["job"], "--config", str(cfg), store=False)
    assert cancelled.returncode == 0, cancelled.stderr  # found through --config's job.store too
    assert f"job {status['job']}:" in cancelled.stdout


def test_a_bad_flag_is_one_line_naming_it_and_nothing_is_written(
    tmp_path: Path, emu: EmulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = gateway_config(tmp_path / "gw.yaml", emu)
    src = write_input(tmp_path / "in.jsonl", 2)
    out, store = tmp_path / "out.jsonl", tmp_path / "jobs.db"
    for flags, text in (
        (("--not-before", "9999-12-31T23:59:59-14:00"), "--not-before: expected a time from 1970"),
        (("--priority", "urgent"), "--priority: expected one of high, normal, low; got 'urgent'"),
        (("--metadata", "k" * 65 + "=v"), "--metadata: keys of 1 to 64 characters"),
        (("--callback-url", "ftp://hooks.example"), "--callback-url: expected an http(s) URL"),
    ):
        code = main(
            ["run", str(src), "--config", str(cfg), "--output", str(out), "--store", str(store), *flags]
        )
        [line] = capsys.readouterr().err.strip().splitlines()  # one line, no traceback
        assert code == 2
        assert line.startswith(f"batchgate: error: {text}"), line
    assert not out.exists()
    assert not store.exists()


def test_plan_takes_the_deadline_run_takes(
    tmp_path: Path, emu: EmulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --deadline` is `run --deadline`: HOURS, or a TIME counted in hours from now (as a job
    created now would count it), refused with run's words."""
    cfg = gateway_config(tmp_path / "gw.yaml", emu)
    src = write_input(tmp_path / "in.jsonl", 2)
    in_30_h = rfc3339(wall_time() + 30 * 3600)
    assert in_30_h is not None
    for given, hours in (("12", 12.0), (in_30_h, 30.0)):
        assert main(["plan", str(src), "--config", str(cfg), "--json", "--deadline", given]) == 0
        plan = orjson.loads(capsys.readouterr().out)
        assert plan["deadline_hours"] == pytest.approx(hours, abs=0.1)  # 0.1 h: a slow machine's start
    run = ["run", str(src), "--config", str(cfg), "--output", str(tmp_path / "o.jsonl")]
    for given, text in (("tomorrow", "--deadline: not an RFC 3339 date-time"), ("0", "--deadline: expected")):
        for argv in (["plan", str(src), "--config", str(cfg)], [*run, "--store", str(tmp_path / "jobs.db")]):
            code = main([*argv, "--deadline", given])
            [line] = capsys.readouterr().err.strip().splitlines()  # one line, run's words
            assert code == 2
            assert line.startswith(f"batchgate: error: {text}"), (argv[0], line)
    assert not (tmp_path / "jobs.db").exists()


async def test_job_takes_the_spec_and_the_yaml_job_section_is_the_default(
    tmp_path: Path, emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = gateway_config(tmp_path / "gw.yaml", emu, job={"name": "from-yaml", "metadata": {"team": "yaml"}})
    secret = new_secret()
    hooks = _Hooks()
    with pytest.raises(JobSpecError, match=r"^priority: expected one of high, normal, low; got 'urgent'$"):
        batchgate.Job([], config=cfg, output=tmp_path / "x.jsonl", priority="urgent")
    monkeypatch.setenv("JOBSPEC_TEST_SECRET", secret)
    async with serving(hooks.app()) as base:
        job = batchgate.Job(
            write_input(tmp_path / "in.jsonl", 4), config=cfg, output=tmp_path / "out.jsonl",
            store=tmp_path / "jobs.db", priority="low", metadata={"run": "9"}, not_before=0,
            callback_url=f"{base}/hook", callback_secret_env="JOBSPEC_TEST_SECRET",
        )  # fmt: skip
        report = await job.arun()
    assert job.exit_code == 0
    assert (report["job"]["name"], report["job"]["priority"]) == ("from-yaml", "low")  # YAML, then Job's
    assert report["job"]["metadata"] == {"run": "9"}  # the door's metadata replaces the config's
    assert _event(hooks, secret)["data"]["id"] == report["batch_id"]
    yaml_only = load_config(cfg).job.spec
    assert (yaml_only.name, dict(yaml_only.metadata)) == ("from-yaml", {"team": "yaml"})


class _Held:
    def cancel(self) -> None:
        return None


class _HeldClock(LoopClock):
    """The loop's clock, but a timer further than `HOLD_S` ahead is held until the test fires it."""

    def __init__(self) -> None:
        self.held: list[Callable[[], None]] = []
        self.asked = asyncio.Event()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        if when - self.now() > HOLD_S:
            self.held.append(callback)
            self.asked.set()
            return _Held()
        return super().call_at(when, callback)


async def test_a_run_waits_for_its_not_before_on_the_clock_sending_nothing(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    cfg_path = gateway_config(tmp_path / "gw.yaml", emu)
    config = load_config(cfg_path)
    clock = _HeldClock()
    said: list[str] = []
    req = RunRequest(
        input_path=write_input(tmp_path / "in.jsonl", 5), config_path=cfg_path,
        output_path=tmp_path / "out.jsonl", store_path=tmp_path / "jobs.db",
        spec=JobSpec(not_before=clock.wall() + 3 * 3600), handle_signals=False,
    )  # fmt: skip
    running = asyncio.ensure_future(run_job(req, config, out=said.append, err=said.append, clock=clock))
    await asyncio.wait_for(clock.asked.wait(), 30)
    assert any("(not_before), in 3.0 h; waiting" in line for line in said), said
    assert provider_totals(emu)["admitted"] == 0  # nothing sent before its start
    [due] = clock.held
    due()
    assert await asyncio.wait_for(running, 60) == 0
    assert provider_totals(emu)["admitted"] == 5
