"""Issue 30's rows for what cannot succeed, as a user meets them: a wrong API key with 200 lines,
and a base_url where nothing listens with 2,000 lines. A wrong key stops its route after a few
tries (issue 38): every line fails at once, unsent, with the provider and the cause (never the
key), exit 6, and `batchgate retry` with the key fixed runs them all. A base_url where nothing
listens stops the run with one line naming the provider and the cause, exit 5 and a resume hint,
everything pending in the store."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

from .harness import MODEL, Cli, expected_ids, ids_once, read_jsonl, write_input

pytestmark = pytest.mark.acceptance

RIGHT_KEY = "sk-accept-right-0123456789"
WRONG_KEY = "sk-accept-wrong-9876543210"
EXIT_NO_TARGET = 5
EXIT_ROUTES_STOPPED = 6


def _locked_emulator() -> EmulatorThread:
    """One OpenAI-style provider that wants RIGHT_KEY: a wrong one is answered 401
    `invalid_api_key` (PROTOCOLS.md, "Error bodies")."""
    provider = {
        "name": "alpha",
        "family": "openai",
        "api_key": RIGHT_KEY,
        "limits": {"rpm": 60_000, "tpm": 100_000_000},
        "latency": {"ttft_p50_ms": 5, "ttft_sigma": 0.1, "per_token_ms": 0},
    }
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": [provider]}))
    emu.start()
    return emu


def _config(path: Path, base_url: str, *, rpm: int = 300) -> Path:
    data: dict[str, Any] = {
        "providers": [
            {
                "name": "alpha",
                "kind": "openai",
                "base_url": base_url,
                "api_key_env": "ALPHA_KEY",
                "limits": {"rpm": rpm},
            }
        ],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.60}},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _stop_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if " stopped: " in line]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.slow
def test_a_wrong_key_fails_its_lines_at_once_and_a_retry_with_the_right_key_runs_everything(cli: Cli) -> None:
    emu = _locked_emulator()
    try:
        n = 200
        src = write_input(cli.cwd / "in.jsonl", n)
        cfg = _config(cli.cwd / "gw.yaml", emu.base_url("alpha"))  # 300 rpm, as the account
        out = cli.cwd / "out.jsonl"
        cli.env["ALPHA_KEY"] = WRONG_KEY
        done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
        assert done.returncode == EXIT_ROUTES_STOPPED, done.stderr
        refused = emu.stats()["providers"]["alpha"]["rejected"]["auth"]
        assert 3 <= refused < 40  # a few tries, not 200 paced at the quota
        errors = read_jsonl(cli.cwd / "out.jsonl.errors.jsonl")
        assert len(errors) == n  # each failed at once, unsent, the reason recorded
        assert all("provider alpha taken out: API key refused (HTTP 401)" in str(e) for e in errors)
        assert (
            f"batchgate retry {orjson.loads((cli.cwd / 'out.jsonl.report.json').read_bytes())['batch_id']}"
            in done.stderr
        )
        report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
        assert report["status"] == "completed"
        assert all(WRONG_KEY not in text and RIGHT_KEY not in text for text in cli.transcript)

        cli.env["ALPHA_KEY"] = RIGHT_KEY
        fast = _config(cli.cwd / "gw2.yaml", emu.base_url("alpha"), rpm=60_000)
        resumed = cli.run("retry", report["batch_id"], "--config", str(fast), "-q")
        assert resumed.returncode == 0, resumed.stderr
        assert ids_once(read_jsonl(out)) == expected_ids(n)
    finally:
        emu.stop()


def test_a_base_url_where_nothing_listens_stops_a_big_job_quickly(cli: Cli) -> None:
    n = 2000
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = _config(cli.cwd / "gw.yaml", f"http://127.0.0.1:{_closed_port()}/v1", rpm=6000)
    out = cli.cwd / "out.jsonl"
    cli.env["ALPHA_KEY"] = WRONG_KEY
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    assert done.returncode == EXIT_NO_TARGET, done.stderr
    line = _stop_line(done.stderr)
    assert "provider alpha taken out: connection refused" in line
    assert f"{n} tasks left; resume with: batchgate resume" in line
    report = orjson.loads((cli.cwd / "out.jsonl.report.json").read_bytes())
    tried = report["providers"]["alpha"]["unreachable_attempts"]
    assert 3 <= tried < 600  # one wave at most, not 13,183 over five minutes
    assert WRONG_KEY not in done.stderr + done.stdout
