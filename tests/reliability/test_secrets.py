"""Secrets: after runs with authentication failures (a wrong key for one provider, the right key
for another, and a provider that echoes whatever key it gets), a SIGKILL mid-run and a resume,
no artifact holds either key — not stdout/stderr of any run, OUT, the errors file, the report,
the JSON progress events, the debug-level JSON log events (a log file and stderr), the Prometheus
metrics scraped mid-run, nor the raw bytes of the job store, its WAL/SHM and lock files. Store
and outputs are readable only by their owner."""

from __future__ import annotations

import asyncio
import signal
import stat
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from acceptance.harness import Cli, read_jsonl, wait_for

from .helpers import (
    check_store_consistent,
    emu_provider,
    emu_totals,
    files_under,
    gw_provider,
    start_emulator,
    write_config,
    write_input,
)
from .scripted import Answer, ScriptedServer, error_body

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

RIGHT_KEY = "sk-right-canary-5d1e0b7c"
WRONG_KEY = "sk-leak-canary-XXXX"


class EchoServerThread:
    """A scripted provider that answers 401 echoing the key it was sent, on its own loop."""

    def __init__(self) -> None:
        self.server = ScriptedServer(self._answer)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def _answer(self, i: int, body: dict[str, Any]) -> Answer:
        echoed = self.server.arrivals[i].authorization
        return Answer(401, error_body("invalid_request_error", f"Incorrect API key: {echoed}",
                                      "invalid_api_key"), {"x-echo": echoed})  # fmt: skip

    def __enter__(self) -> EchoServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def test_no_key_in_any_artifact_after_auth_failures_a_crash_and_a_resume(cli: Cli, tmp_path: Path) -> None:
    emu = start_emulator(
        [
            emu_provider("good", latency_ms=40, api_key=RIGHT_KEY),
            emu_provider("bad", "anthropic", latency_ms=5, api_key=RIGHT_KEY),
        ]
    )
    try:
        with EchoServerThread() as echo:
            providers = [
                gw_provider(emu, "good", api_key_env="BG_GOOD_KEY"),
                gw_provider(emu, "bad", "anthropic", api_key_env="BG_BAD_KEY"),
                {"name": "echo", "kind": "openai", "base_url": echo.server.base_url,
                 "api_key_env": "BG_BAD_KEY"},
            ]  # fmt: skip
            routes = [
                {"model": "m-good", "targets": ["good"]},
                {"model": "m-bad", "targets": ["bad"]},
                {"model": "m-echo", "targets": ["echo"]},
            ]
            cfg = write_config(cli.cwd / "gw.yaml", providers, routes, concurrency=4)
            data = yaml.safe_load(cfg.read_text())  # the wrong-key items fail one by one, each
            data["settings"]["circuit"] = {"take_out_after": 0}  # 401 on record (not taken out)
            cfg.write_text(yaml.safe_dump(data))
            cli.env = {"BG_GOOD_KEY": RIGHT_KEY, "BG_BAD_KEY": WRONG_KEY}
            src = cli.cwd / "in.jsonl"
            write_input(cli.cwd / "a.jsonl", 150, model="m-good")
            write_input(cli.cwd / "b.jsonl", 20, model="m-bad", start=150)
            write_input(cli.cwd / "c.jsonl", 10, model="m-echo", start=170)
            src.write_bytes(b"".join((cli.cwd / f).read_bytes() for f in ("a.jsonl", "b.jsonl", "c.jsonl")))
            out = cli.cwd / "out.jsonl"
            args = ["run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "json"]
            logs = ["--log-format", "json", "--log-level", "debug"]

            proc = cli.start(*args, *logs, "--log-file", str(cli.cwd / "run.log"), "--metrics-port", "0")
            assert proc.stderr is not None
            url = proc.stderr.readline().split(" at ", 1)[1].strip()  # "batchgate: metrics at URL"
            wait_for(lambda: emu_totals(emu)["completed"] >= 30, "30 answers before the kill")
            with urllib.request.urlopen(url, timeout=10) as answer:
                metrics = answer.read()
            cli.finish(proc, signal.SIGKILL)
            # the killed run's store as it lies: database, WAL, shared memory, lock file
            crashed = {f"crashed:{p}": p.read_bytes() for p in files_under(cli.store.parent)}
            assert any(name.endswith("-wal") for name in crashed)
            done = cli.run(*args, *logs)  # log events on stderr this time (in the transcript)
            assert done.returncode == 4, done.stderr  # finished; the wrong-key items failed
            assert echo.server.arrivals, "the echoing provider was never called"
            assert all(a.authorization == f"Bearer {WRONG_KEY}" for a in echo.server.arrivals)
    finally:
        emu.stop()

    rows = read_jsonl(out)
    assert len(rows) == 180
    failed = [r for r in rows if r["error"] is not None]
    assert {r["error"]["code"] for r in failed} == {"authentication"}
    assert len(failed) == 30
    for command in (["status", "--json"], ["jobs"], ["report", cli.status()["job"]]):
        assert cli.run(*command).returncode == 0
    check_store_consistent(cli, 180)

    artifacts = [*files_under(cli.cwd), *files_under(cli.store.parent)]
    names = {p.name for p in artifacts}
    assert {"out.jsonl", "out.jsonl.errors.jsonl", "out.jsonl.report.json", "jobs.db"} <= names
    assert any(n.endswith(".lock") for n in crashed)  # a killed run leaves its lock file (scanned too)
    assert not any(n.endswith(".lock") for n in names)  # a run that ends removes it
    blobs = {str(p): p.read_bytes() for p in artifacts if p.name != "gw.yaml"}
    blobs.update(crashed)
    blobs["metrics"] = metrics
    assert b"batchgate_requests_total" in metrics
    assert b'"event":"job_started"' in (cli.cwd / "run.log").read_bytes()  # the log file is scanned
    assert any('"event":"task_failed"' in t for t in cli.transcript)  # and so is stderr
    blobs.update({f"transcript[{i}]": t.encode() for i, t in enumerate(cli.transcript)})
    assert any(b'"event"' in b or b'"type"' in b for b in blobs.values() if b)  # json events were captured
    for key in (RIGHT_KEY, WRONG_KEY):
        for variant in {key, key[3:], key[-12:]}:
            leaks = [name for name, blob in blobs.items() if variant.encode() in blob]
            assert not leaks, (variant, leaks)

    # owner-only: the store folder 0700, the store's files and every output 0600
    assert stat.S_IMODE(cli.store.parent.stat().st_mode) == 0o700
    for path in [*files_under(cli.store.parent), out, cli.cwd / "out.jsonl.errors.jsonl",
                 cli.cwd / "out.jsonl.report.json"]:  # fmt: skip
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, (path, oct(path.stat().st_mode))
