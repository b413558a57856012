"""A new user's first hour (issue 13, items 1-5), as a user meets it: the CLI (and the library
example) as subprocesses against emulated providers.

1. custom_id stays batchgate's own: never sent, carried back on the result.
2. A run with failed items exits 4, and `retry` / `--retry-failed` re-run exactly those.
3. An unreachable provider is its own state: report, JSON progress events, progress lines.
4. The README's library example runs as written.
5. A resumed job that completes no longer reports the stop of an earlier run.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

from .harness import (
    MODEL,
    Cli,
    expected_ids,
    finish,
    gateway_config,
    ids_once,
    provider_totals,
    read_jsonl,
    wait_for,
    write_input,
)

pytestmark = pytest.mark.acceptance
ROOT = Path(__file__).resolve().parents[2]
DOWN_MODEL = "m-down"


def closed_port() -> int:
    """A loopback port nobody listens on (connecting to it is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def strict_emulator() -> EmulatorThread:
    """Two providers that refuse any body carrying `custom_id`, as strict providers do."""
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.1, "per_token_ms": 0}
    providers = [
        {"name": "alpha", "family": "openai", "limits": {"rpm": 10**6, "tpm": 10**8}},
        {"name": "gamma", "family": "anthropic", "limits": {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8}},
    ]
    for p in providers:
        p |= {"latency": latency, "reject_fields": ["custom_id"]}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": providers}))
    emu.start()
    return emu


LIBRARY_SCRIPT = """
import asyncio, sys
from batchgate.config import load_config
from batchgate.gateway import Gateway

async def main():
    reqs = [{"custom_id": f"r{i}", "model": "m-test", "max_tokens": 5,
             "messages": [{"role": "user", "content": f"Classify: item {i} is wonderful"}]} for i in range(6)]
    async with Gateway(load_config(sys.argv[1])) as gw:
        for r in await gw.abatch(reqs):
            print("batch", r.custom_id, r.ok, r.error)
        async def more():
            for r in reqs:
                yield {**r, "custom_id": "s" + r["custom_id"]}
        async for r in gw.stream(more()):
            print("stream", r.custom_id, r.ok, r.error)

asyncio.run(main())
"""


def test_custom_id_is_never_sent_and_comes_back_on_the_result(cli: Cli) -> None:
    emu = strict_emulator()
    try:
        cfg = gateway_config(cli.cwd / "gw.yaml", emu)
        done = subprocess.run(
            [sys.executable, "-c", LIBRARY_SCRIPT, str(cfg)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        rows = [line.split(" ", 3) for line in done.stdout.splitlines()]
        assert sorted(r[1] for r in rows if r[0] == "batch") == [f"r{i}" for i in range(6)]
        assert sorted(r[1] for r in rows if r[0] == "stream") == [f"sr{i}" for i in range(6)]
        assert all(r[2] == "True" for r in rows), done.stdout
        # the CLI too: an OpenAI Batch line whose body carries custom_id
        line = {"custom_id": "x", "method": "POST", "url": "/v1/chat/completions",
                "body": {"custom_id": "x", "model": MODEL, "max_tokens": 5,
                         "messages": [{"role": "user", "content": "hi"}]}}  # fmt: skip
        src = cli.cwd / "in.jsonl"
        src.write_bytes(orjson.dumps(line) + b"\n")
        out = cli.cwd / "out.jsonl"
        ran = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
        assert ran.returncode == 0, ran.stderr
        assert [r["custom_id"] for r in read_jsonl(out)] == ["x"]
        stats = emu.stats()["providers"]
        assert sum(p["rejected"].get("invalid", 0) for p in stats.values()) == 0
    finally:
        emu.stop()


def two_route_config(path: Path, emu: EmulatorThread, down_url: str, **settings: Any) -> Path:
    """MODEL goes to the emulator's alpha; DOWN_MODEL to provider `down` at `down_url`, which is
    never taken out (`take_out_after: 0`): its items fail one by one, as these tests want."""
    gateway_config(path, emu)
    data = yaml.safe_load(path.read_text())
    data["settings"]["circuit"] = {"take_out_after": 0}
    data["providers"].append({"name": "down", "kind": "openai", "base_url": down_url})
    data["routes"] = [
        {"model": MODEL, "targets": ["alpha:gpt-4o-mini"]},
        {"model": DOWN_MODEL, "targets": ["down:gpt-4o-mini"]},
    ]
    data["settings"]["retry"] |= settings
    data["prices"].pop("claude-3-5-haiku-latest")  # no route sends to it now (a price unused is refused)
    path.write_text(yaml.safe_dump(data))
    return path


def mixed_input(path: Path, n: int) -> Path:
    write_input(path, n)
    rows = read_jsonl(path)
    for i, row in enumerate(rows):
        if i % 2:
            (row.get("body") or row.get("params") or row)["model"] = DOWN_MODEL
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


@pytest.mark.slow  # several CLI runs
def test_failed_items_exit_4_and_retry_runs_exactly_them(cli: Cli, emu: EmulatorThread) -> None:
    n = 10
    src = mixed_input(cli.cwd / "in.jsonl", n)
    down = f"http://127.0.0.1:{closed_port()}/v1"
    cfg = two_route_config(cli.cwd / "gw.yaml", emu, down, max_attempts=2)
    out = cli.cwd / "out.jsonl"
    first = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "json")
    assert first.returncode == 4, first.stderr  # finished, with failed items: not 0
    assert "completed" in first.stderr
    assert "batchgate retry" in first.stderr
    finished = [e for e in map(orjson.loads, first.stdout.splitlines()) if e["event"] == "finished"]
    assert finished[0]["exit_code"] == 4
    # item 3: the unreachable provider is named in the JSON progress events and in the report
    progress = [e for e in map(orjson.loads, first.stdout.splitlines()) if e["event"] == "progress"]
    assert progress[-1]["providers"]["down"]["state"] == "unreachable"
    assert progress[-1]["unreachable"] == ["down unreachable: connection refused, 10 attempts"]
    job = cli.status()["job"]
    report = cli.report(job)
    assert report["unreachable"] == ["down unreachable: connection refused, 10 attempts"]
    assert (report["success_count"], report["failed_count"]) == (5, 5)
    admitted = provider_totals(emu)["admitted"]
    assert admitted == 5

    # the same command again changes nothing and still says so
    again = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    assert again.returncode == 4
    assert provider_totals(emu)["admitted"] == 5

    # `down` comes back (it is now the emulator's alpha): retry runs exactly the 5 failed items
    fixed = two_route_config(cli.cwd / "gw2.yaml", emu, emu.base_url("alpha"))
    retry = cli.run("retry", job[:8], "--config", str(fixed), "-q")
    assert retry.returncode == 0, retry.stderr
    assert "re-queued 5 failed items" in retry.stderr
    assert provider_totals(emu)["admitted"] == 10
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    assert all(r["error"] is None for r in rows)
    assert (cli.cwd / "out.jsonl.errors.jsonl").read_bytes() == b""
    assert cli.report(job)["failed_count"] == 0


@pytest.mark.slow
def test_run_retry_failed_flag_requeues_in_the_same_job(cli: Cli, emu: EmulatorThread) -> None:
    src = mixed_input(cli.cwd / "in.jsonl", 4)
    down = f"http://127.0.0.1:{closed_port()}/v1"
    cfg = two_route_config(cli.cwd / "gw.yaml", emu, down, max_attempts=1)
    out = cli.cwd / "out.jsonl"
    assert cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q").returncode == 4
    fixed = two_route_config(cli.cwd / "gw.yaml", emu, emu.base_url("alpha"))
    done = cli.run("run", str(src), "--config", str(fixed), "--output", str(out), "-q", "--retry-failed")
    assert done.returncode == 0, done.stderr
    assert provider_totals(emu)["admitted"] == 4
    assert ids_once(read_jsonl(out)) == expected_ids(4)


@pytest.mark.slow
def test_unreachable_provider_shows_in_progress_lines_off_a_terminal(cli: Cli, emu: EmulatorThread) -> None:
    src = mixed_input(cli.cwd / "in.jsonl", 4)
    down = f"http://127.0.0.1:{closed_port()}/v1"
    cfg = two_route_config(cli.cwd / "gw.yaml", emu, down, max_attempts=8, base_delay=0.3, max_delay=0.4)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--progress-every", "0.5")
    assert done.returncode == 4, done.stderr
    lines = [line for line in done.stderr.splitlines() if re.match(r"batchgate: \d+s: ", line)]
    assert len(lines) >= 2, done.stderr  # stderr is a pipe here: plain lines at a steady pace
    assert any(re.search(r"down unreachable: connection refused, \d+ attempts", line) for line in lines)
    assert "down unreachable: connection refused, 16 attempts" in done.stderr  # the summary
    assert re.search(r"batchgate: down unreachable: connection refused \(\d+ attempts? so far\)", done.stderr)


@pytest.mark.slow
def test_library_example_runs_as_the_readme_shows_it() -> None:
    example = (ROOT / "examples" / "library.py").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"```python\n{example}```\n" in readme  # the README shows the file, byte for byte
    argv = [sys.executable, "examples/library.py"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        line
        for line in lines[:3]
        if re.fullmatch(r"review-\d (True) (positive|negative|neutral) (alpha|beta|gamma) \d+", line)
    ]
    assert [line.split()[0] for line in lines[:3]] == ["review-0", "review-1", "review-2"]
    assert lines[-1] == "103 succeeded"


@pytest.mark.slow  # several CLI runs
def test_a_resumed_job_that_completes_forgets_the_old_stop(cli: Cli, emu: EmulatorThread) -> None:
    n = 300
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=8)
    out = cli.cwd / "out.jsonl"
    proc = cli.start("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet")
    wait_for(lambda: provider_totals(emu)["completed"] >= 40, "some answers before Ctrl-C")
    code, _, stderr = finish(proc, signal.SIGINT)
    assert code == 130, stderr
    assert cli.status()["stop_reason"] == "interrupted by SIGINT"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert "interrupted" not in done.stderr
    status = cli.status()
    assert (status["state"], status["stop_reason"]) == ("completed", None)
    report = cli.report(status["job"])
    assert (report["status"], report["stop_reason"]) == ("completed", None)
    summary = cli.run("report", "--summary")
    assert summary.stdout.splitlines()[0] == f"job {status['job']}: completed"
