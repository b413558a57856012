"""`batchgate serve` as a user runs it — a subprocess on a free port — in front of an emulator
living in the test process (its counters are the evidence of where lines went), with client keys
made by `batchgate keys create`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml
from openai import OpenAI
from openai.types import Batch

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.server.callbacks.delivery import create_secret
from batchgate.server.tenancy.keys import create_key
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry
from waiting import poll

PROVIDER_KEY = "sk-provider-SECRET-9f3a1c77"  # must never appear in a response, log or file
SPREAD, ALPHA, GAMMA, SLOW, LAG = "m-spread", "m-alpha", "m-gamma", "m-slow", "m-lag"
DENIED = "m-denied"  # its provider wants another key: every request fails with a 401
ENDED = ("completed", "failed", "cancelled", "expired")


def emulator() -> EmulatorThread:
    """Five providers: alpha (OpenAI family; checks the provider key and refuses a `user` field
    with a 400), gamma (Anthropic family), slow (OpenAI family, 1.5 s an answer), lag (1 s) and
    denied (wants another key)."""
    fast = {"ttft_p50_ms": 20.0, "ttft_sigma": 0.2, "per_token_ms": 0}
    providers = [
        {"name": "alpha", "family": "openai", "limits": {"rpm": 10**6, "tpm": 10**8}, "latency": fast,
         "api_key": PROVIDER_KEY, "reject_fields": ["user"]},
        {"name": "gamma", "family": "anthropic", "latency": fast,
         "limits": {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8}},
        {"name": "slow", "family": "openai", "limits": {"rpm": 10**6, "tpm": 10**8},
         "latency": {"ttft_p50_ms": 1500.0, "ttft_sigma": 0.1, "per_token_ms": 0}},
        {"name": "lag", "family": "openai", "limits": {"rpm": 10**6, "tpm": 10**8},
         "latency": {"ttft_p50_ms": 1000.0, "ttft_sigma": 0.1, "per_token_ms": 0}},
        {"name": "denied", "family": "anthropic", "api_key": "another-key", "latency": fast,
         "limits": {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8}},
    ]  # fmt: skip
    emu = EmulatorThread(emulator_config_from_dict({"seed": 5, "providers": providers}))
    emu.start()
    return emu


def gateway_config(path: Path, emu: EmulatorThread) -> Path:
    """Routes: SPREAD over alpha and gamma; ALPHA, GAMMA, SLOW, LAG, DENIED on one provider each."""
    key = {"api_key_env": "EMU_KEY"}
    data: dict[str, Any] = {
        "providers": [
            {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha"), **key},
            {"name": "gamma", "kind": "anthropic", "base_url": emu.base_url("gamma"), **key},
            {"name": "slow", "kind": "openai", "base_url": emu.base_url("slow"), **key,
             "limits": {"rpm": 6}},
            {"name": "lag", "kind": "openai", "base_url": emu.base_url("lag"), **key},
            {"name": "denied", "kind": "anthropic", "base_url": emu.base_url("denied"), **key},
        ],
        "routes": [
            {"model": SPREAD, "targets": ["alpha:gpt-4o-mini", "gamma:claude-3-5-haiku-latest"]},
            {"model": ALPHA, "targets": ["alpha:gpt-4o-mini"]},
            {"model": GAMMA, "targets": ["gamma:claude-3-5-haiku-latest"]},
            {"model": SLOW, "targets": ["slow:gpt-4o-mini"]},
            {"model": LAG, "targets": ["lag:gpt-4o-mini"]},
            {"model": DENIED, "targets": ["denied:claude-3-5-haiku-latest"]},
        ],
        "settings": {
            "concurrency": 16,
            "retry": {"max_attempts": 3, "base_delay": 0.05, "max_delay": 0.2},
            "timeouts": {"connect": 5, "total": 20},
            "seed": 1,
            # DENIED's items fail one by one (the retry and results tests count them): its target
            # is never taken out (taking out is tested in tests/jobs/test_engine_takeout.py)
            "circuit": {"take_out_after": 0},
        },
    }  # fmt: skip
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def batch_line(i: int, model: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"Say hi ({i}, {model})"}]
    body = {"model": model, "max_tokens": 5, "messages": messages}
    return {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


@dataclass
class Server:
    url: str
    root: Path
    proc: subprocess.Popen[str]
    log: Path

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def keys_create(self, *, admin: bool = False, secret: bool = True) -> str:
        """A key made in-process (`batchgate keys create` itself runs in `keys_create`); with
        `secret` (as the CLI makes it) it has a webhook secret to sign callbacks with."""
        registry = Registry(self.root / REGISTRY_FILE)
        try:
            key, token = create_key(registry, admin=admin, name="test", now=int(time.time()))
            if secret:
                create_secret(registry, key.id)
            return token
        finally:
            registry.close()

    def stop(self) -> int:
        """SIGTERM and wait (the server stops its jobs; they resume at the next start)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        finally:
            with contextlib.suppress(Exception):
                self.proc.kill()
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["EMU_KEY"] = PROVIDER_KEY
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _place(root: Path) -> list[str]:
    return ["--store", str(root / "jobs.db")]


def keys_create(root: Path, *, admin: bool = False) -> str:
    argv = [sys.executable, "-m", "batchgate", "keys", "create", *_place(root)]
    argv += ["--admin"] if admin else []
    done = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def start_server(root: Path, config: Path, *extra: str, env: dict[str, str] | None = None) -> Server:
    """The server as a subprocess; `env` adds to (or replaces) its environment's variables."""
    log = root / "server.log"
    argv = [sys.executable, "-m", "batchgate", "serve", "--config", str(config), "--port", "0", *_place(root)]
    argv += extra
    with log.open("a") as err:
        proc = subprocess.Popen(
            argv, env={**_env(), **(env or {})}, stdout=subprocess.PIPE, stderr=err, text=True
        )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # blocks until the server listens (or exits)
    if "listening on " not in first:
        proc.kill()
        raise AssertionError(f"the server did not start: {first!r}\n{log.read_text()}")
    return Server(first.split("listening on ", 1)[1].strip(), root, proc, log)


@contextlib.contextmanager
def running(root: Path, config: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    server = start_server(root, config, *extra, env=env)
    try:
        yield server
    finally:
        server.stop()


def client(server: Server, key: str) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=key, max_retries=0)


def wait_ended(c: OpenAI, batch_id: str) -> Batch:
    """Poll `batches.retrieve` as a user does, bounded (never a timing assertion)."""
    return poll(
        lambda: c.batches.retrieve(batch_id),
        lambda b: b.status in ENDED,
        lambda b: f"batch {batch_id}: {b.status}",
    )


def lines_of(c: OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    assert file_id is not None
    return [orjson.loads(x) for x in c.files.content(file_id).read().splitlines() if x.strip()]


def upload(c: OpenAI, lines: list[dict[str, Any]]) -> str:
    return c.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch").id


def create(c: OpenAI, file_id: str) -> Batch:
    return c.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
