"""One provider key's quota shared across processes, run as a user does: Redis stopped in the
middle of a job stops its sending with a clear error; once Redis is back, the same command
completes the job — every item once, nothing sent twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from redisutil import PrivateRedis, fresh_namespace

from .harness import Cli, expected_ids, ids_once, provider_totals, read_jsonl, wait_for, write_input

pytestmark = [pytest.mark.acceptance, pytest.mark.redis]

ITEMS = 40
RPM = 1200  # 20 requests/s: the job lasts a few seconds, long enough to pull Redis from under it


@pytest.fixture
def limited() -> Iterator[EmulatorThread]:
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.2, "per_token_ms": 0}
    provider = {"name": "alpha", "family": "openai", "limits": {"rpm": RPM, "tpm": 10**8}, "latency": latency}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 5, "providers": [provider]}))
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def redis_server() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def config(path: Path, emu: EmulatorThread, quota: dict[str, Any]) -> Path:
    data = {
        "providers": [
            {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha"), "limits": {"rpm": RPM}}
        ],
        "routes": [{"model": "m-test", "targets": ["alpha:gpt-4o-mini"]}],
        "settings": {"concurrency": 8, "retry": {"base_delay": 0.05, "max_delay": 0.2}, "seed": 1},
        "quota": quota,
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.slow  # a Redis outage mid-run
def test_redis_stopped_mid_run_stops_sending_and_the_job_completes_once_it_is_back(
    cli: Cli, limited: EmulatorThread, redis_server: PrivateRedis
) -> None:
    cfg = config(cli.cwd / "gw.yaml", limited, {"store": redis_server.url, "namespace": fresh_namespace()})
    src = write_input(cli.cwd / "in.jsonl", ITEMS)
    out = cli.cwd / "out.jsonl"
    args = ("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet")
    proc = cli.start(*args)
    wait_for(lambda: provider_totals(limited)["admitted"] >= 8, "the job to get going")
    redis_server.stop()
    code, _, err = cli.finish(proc)
    sent = provider_totals(limited)["admitted"]
    assert code == 3, err  # stopped, to be resumed
    assert "quota store" in err
    assert "unreachable" in err
    assert "Traceback" not in err
    assert sent < ITEMS  # sending stopped: no per-process limit took over
    status = cli.status()
    assert status["pending"] == ITEMS - status["succeeded"]  # nothing failed: the rest waits

    redis_server.start()
    done = cli.run(*args)
    assert done.returncode == 0, done.stderr
    assert ids_once(read_jsonl(out)) == expected_ids(ITEMS)
    assert provider_totals(limited)["duplicates"] == 0  # no item sent again after it was answered


def test_an_unknown_quota_store_is_one_line_naming_the_key(cli: Cli, limited: EmulatorThread) -> None:
    cfg = config(cli.cwd / "gw.yaml", limited, {"store": "redsi://typo"})
    src = write_input(cli.cwd / "in.jsonl", 2)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(cli.cwd / "o.jsonl"))
    assert done.returncode != 0
    assert "quota.store" in done.stderr
    assert "unknown quota store" in done.stderr
    assert "Traceback" not in done.stderr
