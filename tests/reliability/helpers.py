"""Shared helpers of the reliability suite: emulators outside the process under test, gateway
configs pointing at them, unique-prompt inputs, and the CLI run as a user runs it (a subprocess).

The CLI runner (`Cli`) and `one_error_line` are the acceptance suite's, re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from acceptance.harness import Cli, provider_totals
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
    hedge: bool = True,
) -> Path:
    """A gateway config YAML; `providers` are gateway provider entries (name, kind, base_url...);
    `hedge` False for tests that count every request sent (a hedge is a deliberate duplicate)."""
    data: dict[str, Any] = {
        "providers": providers,
        "routes": routes or [{"model": MODEL, "targets": [p["name"] for p in providers]}],
        "settings": {
            "concurrency": concurrency,
            "retry": {"max_attempts": max_attempts, "base_delay": 0.02, "max_delay": 0.2, **(retry or {})},
            "timeouts": {"connect": 2, "total": 10, "hedge": hedge},
            "seed": 1,
        },
    }
    if any(r["model"] == MODEL for r in data["routes"]):  # priced, so a run says nothing about money
        data["prices"] = {MODEL: {"input": 0.15, "output": 0.60}}
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
