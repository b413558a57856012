"""What the `batchgate serve` benchmarks share: one emulated provider (`alpha`, OpenAI family) with
a requests-per-minute limit and a latency, a gateway config routing `m-bench` to it, and a server
started as a subprocess on a free port with one client key (`served`)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.server.tenancy.keys import create_key
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry

CLI = [sys.executable, "-m", "batchgate"]
MODEL = "m-bench"


def emulator(rpm: int, latency_ms: float) -> EmulatorThread:
    """`alpha` enforcing `rpm` (tokens unlimited), answering after about `latency_ms`."""
    latency = {"ttft_p50_ms": latency_ms, "ttft_sigma": 0.2, "per_token_ms": 0}
    provider = {"name": "alpha", "family": "openai", "limits": {"rpm": rpm, "tpm": 10**9}, "latency": latency}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 7, "providers": [provider]}))
    emu.start()
    return emu


def write_config(path: Path, emu: EmulatorThread, rpm: int | None, concurrency: int) -> Path:
    """A gateway config for `alpha`, its limit declared as a user does (None: none declared)."""
    provider: dict[str, object] = {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")}
    if rpm is not None:
        provider["limits"] = {"rpm": rpm}
    data = {
        "providers": [provider],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "settings": {"concurrency": concurrency, "seed": 1},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True)
class Served:
    url: str  # the server's base URL, without /v1
    key: str  # a client key (not an admin)
    process: subprocess.Popen[str]


@contextlib.contextmanager
def served(root: Path, config: Path, extra: Sequence[str] = ()) -> Iterator[Served]:
    """`batchgate serve` on a free port with its store and data in `root`, stopped at the end;
    `extra`: more of its options (`--loop asyncio`, say)."""
    registry = Registry(root / REGISTRY_FILE)
    key = create_key(registry, admin=False, name="bench", now=int(time.time()))[1]
    registry.close()
    argv = [*CLI, "serve", "--config", str(config), "--port", "0", "--store", str(root / "jobs.db"), *extra]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split("listening on ", 1)[1].strip()
        yield Served(url, key, server)
    finally:
        server.terminate()
        server.wait(timeout=60)
