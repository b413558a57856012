"""Running `batchgate` as a user does — a subprocess — against an emulator that lives in the test
process (so it outlives a `kill -9` of the CLI and its counters can be read afterwards)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

import waiting
from batchgate.emulator import EmulatorThread, emulator_config_from_dict

MODEL = "m-test"
WAIT_LIMIT_S = 30.0


def emulator(*, latency_ms: float = 100.0, faults: dict[str, float] | None = None) -> EmulatorThread:
    """Two providers (OpenAI and Anthropic families) with generous limits: no 429s, no faults."""
    latency = {"ttft_p50_ms": latency_ms, "ttft_sigma": 0.2, "per_token_ms": 0}
    providers = [
        {"name": "alpha", "family": "openai", "limits": {"rpm": 1_000_000, "tpm": 100_000_000}},
        {"name": "gamma", "family": "anthropic", "limits": {"rpm": 1_000_000, "itpm": 10**8, "otpm": 10**8}},
    ]
    for p in providers:
        p["latency"] = latency
        if faults:
            p["faults"] = faults
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": providers}))
    emu.start()
    return emu


def gateway_config(
    path: Path,
    emu: EmulatorThread,
    *,
    concurrency: int = 16,
    max_attempts: int = 4,
    job: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    prices: dict[str, Any] | None = None,
    hedge: bool = True,
) -> Path:
    """A gateway config pointing at `emu`; route MODEL spreads over both providers. `hedge` False
    for tests that count every request sent (a hedge is a deliberate duplicate)."""
    data: dict[str, Any] = {
        "providers": [
            {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")},
            {"name": "gamma", "kind": "anthropic", "base_url": emu.base_url("gamma")},
        ],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini", "gamma:claude-3-5-haiku-latest"]}],
        "settings": {
            "concurrency": concurrency,
            "retry": {"max_attempts": max_attempts, "base_delay": 0.05, "max_delay": 0.2},
            "timeouts": {"connect": 5, "total": 20, "hedge": hedge},
            "seed": 1,
        },
        "prices": prices
        or {
            "gpt-4o-mini": {"input": 0.15, "output": 0.60},
            "claude-3-5-haiku-latest": {"input": 0.80, "output": 4.00},
        },
    }
    if job:
        data["job"] = job
    if budget:
        data["budget"] = budget
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def prompt(i: int, mood: str = "review") -> str:
    """A unique prompt (the emulator's duplicate counter keys on it); `mood` picks the answer."""
    words = {"positive": "wonderful great", "negative": "awful broken", "neutral": "blue square"}
    return f"Classify the sentiment of this review. Review: item {i} is {words.get(mood, 'fine')} ({i})"


def input_line(i: int, mood: str = "review") -> dict[str, Any]:
    """Input line i, in the three shapes by turn: OpenAI Batch, Anthropic batch, plain."""
    cid = f"item-{i:05d}"
    messages = [{"role": "user", "content": prompt(i, mood)}]
    if i % 3 == 0:
        body = {"model": MODEL, "max_tokens": 5, "messages": messages}
        return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}
    if i % 3 == 1:
        return {"custom_id": cid, "params": {"model": MODEL, "max_tokens": 5, "messages": messages}}
    return {"custom_id": cid, "model": MODEL, "max_tokens": 5, "messages": messages}


def write_input(path: Path, n: int, mood: Callable[[int], str] = lambda i: "review") -> Path:
    path.write_bytes(b"".join(orjson.dumps(input_line(i, mood(i))) + b"\n" for i in range(n)))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def provider_totals(emu: EmulatorThread) -> dict[str, int]:
    """admitted, completed, duplicates and in_flight summed over the emulator's providers."""
    stats = emu.stats()["providers"]
    keys = ("admitted", "completed", "duplicates", "in_flight")
    return {k: sum(int(p[k]) for p in stats.values()) for k in keys}


wait_for = waiting.wait_for  # the suite's one bounded wait (tests/waiting.py), for the CLI tests


@dataclass
class Cli:
    """`python -m batchgate ...` in `cwd`, with the job store under the test's tmp dir (`--store`
    appended where it applies). `env` is added to the environment; `transcript` keeps every
    stdout and stderr seen (the secret scans read it)."""

    cwd: Path
    store: Path
    env: dict[str, str] = field(default_factory=dict)
    store_url: str | None = None  # a postgresql:// URL to pass as --store instead of the file
    started: list[subprocess.Popen[str]] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)

    def argv(self, args: tuple[str, ...], store: bool = True) -> list[str]:
        argv = [sys.executable, "-m", "batchgate", *args]
        return [*argv, "--store", self.store_url or str(self.store)] if store else argv

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("COLUMNS", None)
        env["PYTHONUNBUFFERED"] = "1"
        env["XDG_CACHE_HOME"] = str(self.cwd / "cache")  # the machine's quota ledger, per test
        env.update(self.env)
        return env

    def run(
        self, *args: str, store: bool = True, cwd: Path | None = None, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(args, store),
            cwd=cwd or self.cwd,
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
        """`finish` (below), signalling only a process still running; its output is kept."""
        code, out, err = finish(proc, sig if proc.poll() is None else None)
        self.transcript += [out, err]
        return code, out, err

    def stop_all(self) -> None:
        """Kill whatever a failed test left running."""
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)

    def try_status(self) -> dict[str, Any] | None:
        """`status --json`, or None while there is no job to show yet."""
        done = self.run("status", "--json")
        return orjson.loads(done.stdout) if done.returncode == 0 else None

    def status(self, job: str | None = None) -> dict[str, Any]:
        done = self.run("status", *([job] if job else []), "--json")
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = orjson.loads(done.stdout)
        return result

    def report(self, job: str) -> dict[str, Any]:
        done = self.run("report", job)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = orjson.loads(done.stdout)
        return result


@contextlib.contextmanager
def cli_under(tmp_path: Path) -> Iterator[Cli]:
    """A `Cli` working in tmp_path/work with its store in tmp_path/store; kills what it left running."""
    work = tmp_path / "work"
    work.mkdir()
    runner = Cli(cwd=work, store=tmp_path / "store" / "jobs.db")
    try:
        yield runner
    finally:
        runner.stop_all()


def finish(proc: subprocess.Popen[str], sig: int | None = None) -> tuple[int, str, str]:
    """Optionally signal `proc`, then wait for it: (exit code, stdout, stderr)."""
    if sig is not None:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def kill_hard(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)


def one_error_line(stderr: str) -> str:
    """The whole stderr, asserted to be one `batchgate: error:` line and no traceback."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith("batchgate: error: "), stderr
    return lines[0]


def ids_once(rows: list[dict[str, Any]]) -> set[str]:
    ids = [row["custom_id"] for row in rows]
    assert len(ids) == len(set(ids)), "a custom_id appears more than once"
    return set(ids)


def expected_ids(n: int) -> set[str]:
    return {f"item-{i:05d}" for i in range(n)}


def leftovers(directory: Path) -> Iterator[Path]:
    """Temporary files the atomic writers would leave behind if interrupted."""
    return (p for p in directory.iterdir() if p.name.endswith(".tmp"))
