"""Issue 38's outages, as a user meets them: a provider that answered and then goes away for a
while (the emulator stopped mid-run, then started again on the same port) is waited out — the job
completes with nothing failed, the JSON log saying when the target paused and resumed; one that
stays away longer than `max_outage` ends as a take-out (exit 5); and a wrong key on one of two
routes stops that route alone: its lines fail with the reason, the other route's all complete,
exit 6."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from waiting import wait_for

from .harness import Cli, expected_ids, ids_once, prompt, read_jsonl

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

RIGHT_KEY = "sk-outage-right-0123456789"
WRONG_KEY = "sk-outage-wrong-9876543210"
EXIT_ROUTES_STOPPED = 6
EXIT_NO_TARGET = 5


def _emulator(port: int = 0, *, locked: bool = False) -> EmulatorThread:
    """alpha (with `locked`: wanting RIGHT_KEY, a wrong one answered 401 `invalid_api_key`,
    shared/PROTOCOLS.md "Error bodies") and beta, OpenAI-style, 20 ms to answer."""
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.1, "per_token_ms": 0}
    limits = {"rpm": 60_000, "tpm": 100_000_000}
    providers: list[dict[str, Any]] = [
        {"name": n, "family": "openai", "limits": limits, "latency": latency} for n in ("alpha", "beta")
    ]
    if locked:
        providers[0]["api_key"] = RIGHT_KEY
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": providers}), port=port)
    emu.start()
    return emu


def _config(
    path: Path, emu: EmulatorThread, *, rpm: int, max_outage: float | None = None, models: int = 1
) -> Path:
    providers = [
        {
            "name": n,
            "kind": "openai",
            "base_url": emu.base_url(n),
            "api_key_env": "ALPHA_KEY",
            "limits": {"rpm": rpm},
        }
        for n in ("alpha", "beta")
    ]
    routes = [
        {"model": "m-a", "targets": ["alpha:gpt-4o-mini"]},
        {"model": "m-b", "targets": ["beta:gpt-4o-mini"]},
    ]
    data: dict[str, Any] = {
        "providers": providers[:models],
        "routes": routes[:models],
        "prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.60}},
        "settings": {"retry": {"base_delay": 0.05, "max_delay": 0.2}},
    }
    if max_outage is not None:
        data["settings"]["circuit"] = {"max_outage": max_outage}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _input(path: Path, n: int, models: tuple[str, ...] = ("m-a",)) -> Path:
    """n plain lines `item-00000`..., their models taking turns."""
    rows = [
        {"custom_id": f"item-{i:05d}", "model": models[i % len(models)], "max_tokens": 5, "messages": m}
        for i in range(n)
        for m in ([{"role": "user", "content": prompt(i)}],)
    ]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _events(log: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in log.read_bytes().splitlines() if line.startswith(b"{")]


def _completed(emu: EmulatorThread) -> int:
    return int(emu.stats()["providers"]["alpha"]["completed"])


def test_an_outage_longer_than_the_old_grace_is_waited_out_and_the_job_completes(cli: Cli) -> None:
    emu = _emulator()
    port = urlsplit(emu.base_url("alpha")).port
    assert port is not None
    n = 120
    src = _input(cli.cwd / "in.jsonl", n)
    cfg = _config(cli.cwd / "gw.yaml", emu, rpm=1200, max_outage=600)  # 20 a second: 6 s of work
    out, log = cli.cwd / "out.jsonl", cli.cwd / "log.jsonl"
    cli.env["ALPHA_KEY"] = RIGHT_KEY
    args = ("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    proc = cli.start(*args, "--log-format", "json", "--log-file", str(log))
    try:
        wait_for(lambda: _completed(emu) >= 20, "20 answers before the outage")
        emu.stop()
        wait_for(lambda: log.exists() and b"target_paused" in log.read_bytes(), "the target paused")
        time.sleep(2.0)  # the outage goes on: probes fail, nothing is failed or burned
    finally:
        emu = _emulator(port)  # back on the same port
    try:
        code, _, err = cli.finish(proc)
    finally:
        emu.stop()
    assert code == 0, err
    assert ids_once(read_jsonl(out)) == expected_ids(n)
    assert (
        not (cli.cwd / "out.jsonl.errors.jsonl").exists()
        or read_jsonl(cli.cwd / "out.jsonl.errors.jsonl") == []
    )
    events = [e for e in _events(log) if e.get("event") in ("target_paused", "target_resumed", "target_out")]
    names = [e["event"] for e in events]
    assert names[:2] == ["target_paused", "target_resumed"], names
    assert "target_out" not in names
    assert events[0]["provider"] == "alpha"
    assert events[0]["cause"] in ("connection refused", "connection broken")


def test_an_outage_longer_than_max_outage_ends_as_a_take_out(cli: Cli) -> None:
    emu = _emulator()
    n = 400
    src = _input(cli.cwd / "in.jsonl", n)
    cfg = _config(cli.cwd / "gw.yaml", emu, rpm=1200, max_outage=1.5)
    out = cli.cwd / "out.jsonl"
    cli.env["ALPHA_KEY"] = RIGHT_KEY
    proc = cli.start("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    try:
        wait_for(lambda: _completed(emu) >= 20, "20 answers before the outage")
    finally:
        emu.stop()  # and never back
    code, _, err = cli.finish(proc)
    assert code == EXIT_NO_TARGET, err
    stop = [line for line in err.splitlines() if " stopped: " in line]
    assert len(stop) == 1, err
    assert "provider alpha taken out: " in stop[0]
    assert "(max_outage)" in stop[0]
    assert "resume with: batchgate resume" in stop[0]


def test_a_wrong_key_on_one_of_two_routes_stops_that_route_alone(cli: Cli) -> None:
    emu = _emulator(locked=True)
    try:
        n = 60
        src = _input(cli.cwd / "in.jsonl", n, ("m-a", "m-b"))
        cfg = _config(cli.cwd / "gw.yaml", emu, rpm=6000, models=2)
        out = cli.cwd / "out.jsonl"
        cli.env["ALPHA_KEY"] = WRONG_KEY
        done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
        refused = emu.stats()["providers"]["alpha"]["rejected"]["auth"]
        healthy = emu.stats()["providers"]["beta"]["completed"]
    finally:
        emu.stop()
    assert done.returncode == EXIT_ROUTES_STOPPED, done.stderr
    assert healthy == n // 2  # the healthy route's lines all done
    assert 3 <= refused < 40  # a few tries, not 30 lines' worth of attempts
    rows = read_jsonl(out)
    assert {r["custom_id"] for r in rows if r["error"] is None} == {f"item-{i:05d}" for i in range(1, n, 2)}
    errors = read_jsonl(cli.cwd / "out.jsonl.errors.jsonl")
    assert {e["custom_id"] for e in errors} == {f"item-{i:05d}" for i in range(0, n, 2)}
    assert all("provider alpha taken out: API key refused (HTTP 401)" in str(e) for e in errors)
    assert "batchgate retry" in done.stderr
    assert all(WRONG_KEY not in text and RIGHT_KEY not in text for text in cli.transcript)
