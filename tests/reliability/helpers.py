"""Shared helpers of the reliability suite: emulators outside the process under test, gateway
configs pointing at them, unique-prompt inputs, and the CLI run as a user runs it (a subprocess).

Kept apart from tests/acceptance (owned by another suite) so both can change independently.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from acceptance.harness import provider_totals
from batchgate.emulator import EmulatorThread, emulator_config_from_dict

MODEL = "m-rel"


def emu_provider(
    name: str,
    family: str = "openai",
    *,
    latency_ms: float = 0.0,
    faults: dict[str, float] | None = None,
    api_key: str | None = None,
    rpm: int = 1_000_000,
    **extra: Any,
) -> dict[str, Any]:
    """An emulated provider with generous limits unless told otherwise."""
    limits: dict[str, int] = {"rpm": rpm, "tpm": 10**9}
    if family == "anthropic":
        limits = {"rpm": rpm, "itpm": 10**9, "otpm": 10**9}
    provider: dict[str, Any] = {
        "name": name,
        "family": family,
        "limits": limits,
        "latency": {"ttft_p50_ms": latency_ms, "ttft_sigma": 0.2, "per_token_ms": 0},
    }
    if faults:
        provider["faults"] = faults
    if api_key is not None:
        provider["api_key"] = api_key
    provider.update(extra)
    return provider


def start_emulator(providers: list[dict[str, Any]], seed: int = 3) -> EmulatorThread:
    """An emulator on its own loop and thread: it outlives a killed CLI and its counters stay."""
    emu = EmulatorThread(emulator_config_from_dict({"seed": seed, "providers": providers}))
    emu.start()
    return emu


def write_config(
    path: Path,
    providers: list[dict[str, Any]],
    routes: list[dict[str, Any]] | None = None,
    *,
    concurrency: int = 8,
    max_attempts: int = 4,
    extra: dict[str, Any] | None = None,
    retry: dict[str, Any] | None = None,
) -> Path:
    """A gateway config YAML; `providers` are gateway provider entries (name, kind, base_url...)."""
    data: dict[str, Any] = {
        "providers": providers,
        "routes": routes or [{"model": MODEL, "targets": [p["name"] for p in providers]}],
        "settings": {
            "concurrency": concurrency,
            "retry": {"max_attempts": max_attempts, "base_delay": 0.02, "max_delay": 0.2, **(retry or {})},
            "timeouts": {"connect": 2, "total": 10},
            "seed": 1,
        },
    }
    data.update(extra or {})
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def gw_provider(emu: EmulatorThread, name: str, kind: str = "openai", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "base_url": emu.base_url(name), **extra}


def prompt(i: int, tag: str = "") -> str:
    """A unique prompt per item: the emulator's duplicate counter keys on the prompt text."""
    return f"Please echo this note back: {tag}item number {i} of the reliability run"


def write_input(path: Path, n: int, *, model: str = MODEL, tag: str = "", start: int = 0) -> Path:
    lines = []
    for i in range(start, start + n):
        body = {
            "custom_id": f"item-{i:05d}",
            "model": model,
            "max_tokens": 5,
            "messages": [{"role": "user", "content": prompt(i, tag)}],
        }
        lines.append(orjson.dumps(body) + b"\n")
    path.write_bytes(b"".join(lines))
    return path


emu_totals = provider_totals


def one_error_line(stderr: str) -> str:
    """stderr is exactly one `batchgate: error:` line, with no traceback."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith("batchgate: error: "), stderr
    return lines[0]


@dataclass
class Cli:
    """`python -m batchgate ...` in `cwd` with `--store` appended where it applies."""

    cwd: Path
    store: Path
    env: dict[str, str] = field(default_factory=dict)
    started: list[subprocess.Popen[str]] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)  # every stdout/stderr seen (secret scans)

    def argv(self, args: tuple[str, ...], store: bool = True) -> list[str]:
        argv = [sys.executable, "-m", "batchgate", *args]
        return [*argv, "--store", str(self.store)] if store else argv

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("COLUMNS", None)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.env)
        return env

    def run(self, *args: str, store: bool = True, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(args, store),
            cwd=self.cwd,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        self.transcript += [done.stdout, done.stderr]
        return done

    def start(self, *args: str, store: bool = True) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            self.argv(args, store),
            cwd=self.cwd,
            env=self._env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.started.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen[str], sig: int | None = None) -> tuple[int, str, str]:
        if sig is not None and proc.poll() is None:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        self.transcript += [out, err]
        return proc.returncode, out, err

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)

    def status(self) -> dict[str, Any]:
        done = self.run("status", "--json")
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = orjson.loads(done.stdout)
        return result


def check_store_consistent(cli: Cli, total: int) -> dict[str, Any]:
    """`status --json` adds up and, once completed, nothing is left pending or running."""
    status = cli.status()
    assert status["total"] == total, status
    assert status["succeeded"] + status["failed"] + status["pending"] == total, status
    if status["state"] == "completed":
        assert status["pending"] == 0, status
    return status


def files_under(directory: Path) -> Iterator[Path]:
    return (p for p in directory.rglob("*") if p.is_file())
