"""Stopping what cannot succeed, end to end through the engine (real HTTP on loopback, the
in-memory store): a refused key or a port where nothing listens takes the provider out after a
few tries; a route with another target fails over to it; a route with none left stops the job,
leaving every unsent item pending, and a resume with the key fixed runs them."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.errors import ConfigError
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import EngineHost
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskSpec, TaskState

from .factories import job

MODEL = "m-test"
RIGHT_KEY = "sk-right-key-123456"
WRONG_KEY = "sk-wrong-key-654321"


def _emulator() -> Emulator:
    """alpha wants RIGHT_KEY (a wrong one gets OpenAI's 401 `invalid_api_key`, PROTOCOLS.md
    "Error bodies"); beta takes any key. Both at 60,000 rpm."""
    latency = {"ttft_p50_ms": 5, "ttft_sigma": 0.1, "per_token_ms": 0}
    limits = {"rpm": 60_000, "tpm": 100_000_000}
    providers = [
        {"name": "alpha", "family": "openai", "limits": limits, "latency": latency, "api_key": RIGHT_KEY},
        {"name": "beta", "family": "openai", "limits": limits, "latency": latency},
    ]
    return Emulator(emulator_config_from_dict({"seed": 5, "providers": providers}))


def _config(targets: list[str], alpha_key: str = WRONG_KEY, concurrency: int = 16) -> GatewayConfig:
    providers = [
        {"name": n, "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "limits": {"rpm": 60_000}}
        for n in ("alpha", "beta")
    ]
    providers[0]["api_key"] = alpha_key
    data: dict[str, Any] = {
        "providers": providers,
        "routes": [{"model": MODEL, "targets": targets}],
        "settings": {
            "concurrency": concurrency,
            "retry": {"max_attempts": 8, "base_delay": 0.01, "max_delay": 0.05},
        },
    }
    return config_from_dict(data, source="test.yaml")


def _spec(i: int) -> TaskSpec:
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": f"item {i}"}]}
    return TaskSpec(seq=i, line_no=i + 1, custom_id=f"c{i}", body=body)


async def _store(n: int) -> MemoryJobStore:
    store = MemoryJobStore()
    await store.create_job(job(task_total=n))
    await store.add_tasks("job1", [_spec(i) for i in range(n)])
    return store


def _engine(store: MemoryJobStore, config: GatewayConfig, urls: dict[str, str]) -> JobEngine:
    return JobEngine(config, store, "job1", host=EngineHost(base_urls=urls))


def _urls(emu: Emulator) -> dict[str, str]:
    return {n: emu.base_url(n) for n in ("alpha", "beta")}


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_a_wrong_key_fails_its_route_after_a_few_tries_and_a_retry_runs_them() -> None:
    async with _emulator() as emu:
        store = await _store(200)
        outcome = await _engine(store, _config(["alpha:gpt-4o-mini"]), _urls(emu)).run()
        refused = emu.stats()["providers"]["alpha"]["rejected"]["auth"]
        assert outcome.status == "completed", outcome.stop_reason  # the route stops, not the job
        assert outcome.routes_stopped
        assert not outcome.no_target
        assert 3 <= refused < 40  # a few tries (a first wave in flight), not 200, not 8 per item
        counts = await store.counts("job1")
        assert counts[TaskState.FAILED] == 200  # each failed at once, unsent, with the reason
        failed = store.iter_results("job1", ordered=True, states=[TaskState.FAILED])
        errors = [t.error or "" async for t in failed]
        assert all("provider alpha taken out: API key refused (HTTP 401)" in e for e in errors), errors[:3]
        assert all("no target left for model 'm-test'" in e for e in errors)
        assert not any(WRONG_KEY in e or RIGHT_KEY in e for e in errors)
        assert outcome.statistics.providers["alpha"].circuit == "out"

        assert await store.requeue_failed("job1") == 200  # `batchgate retry`, the key fixed
        fixed = await _engine(store, _config(["alpha:gpt-4o-mini"], RIGHT_KEY), _urls(emu)).run()
        assert fixed.status == "completed"
        assert (await store.counts("job1"))[TaskState.SUCCEEDED] == 200


async def test_a_closed_port_stops_a_big_job_at_once() -> None:
    urls = {"alpha": f"http://127.0.0.1:{_closed_port()}/v1", "beta": "http://127.0.0.1:9/v1"}
    store = await _store(2000)
    outcome = await _engine(store, _config(["alpha:gpt-4o-mini"], concurrency=512), urls).run()
    assert outcome.status == "stopped"
    assert outcome.no_target
    assert (outcome.stop_reason or "").startswith("provider alpha taken out: connection refused")
    tried = outcome.statistics.providers["alpha"].unreachable_attempts
    assert 3 <= tried < 600  # at most one wave of connection attempts, never 8 per item
    assert (await store.counts("job1"))[TaskState.PENDING] == 2000


async def test_a_route_with_one_bad_key_finishes_on_its_other_target() -> None:
    async with _emulator() as emu:
        store = await _store(200)
        config = _config(["alpha:gpt-4o-mini", "beta:gpt-4o-mini"])
        outcome = await _engine(store, config, _urls(emu)).run()
        stats = emu.stats()["providers"]
    assert outcome.status == "completed", outcome.stop_reason
    assert (await store.counts("job1"))[TaskState.SUCCEEDED] == 200
    assert outcome.statistics.providers["alpha"].circuit == "out"
    assert stats["beta"]["completed"] == 200
    assert stats["alpha"]["rejected"]["auth"] < 40


async def test_the_default_error_budget_stops_a_run_where_almost_nothing_succeeds() -> None:
    provider = {"name": "beta", "family": "openai", "limits": {"rpm": 60_000, "tpm": 10**8}}
    provider |= {"latency": {"ttft_p50_ms": 2, "ttft_sigma": 0.1}, "faults": {"server_error": 1.0}}
    async with Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]})) as emu:
        store = await _store(400)
        data: dict[str, Any] = {
            "providers": [{"name": "beta", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
            "routes": [{"model": MODEL, "targets": ["beta:gpt-4o-mini"]}],
            "settings": {"concurrency": 8, "retry": {"max_attempts": 1}},
        }
        config = config_from_dict(data, source="test.yaml")  # no `job:` section: the defaults
        assert config.job.error_rate_threshold == 0.9
        outcome = await _engine(store, config, {"beta": emu.base_url("beta")}).run()
    assert outcome.status == "stopped"
    assert not outcome.no_target  # the target answers (500s): an error budget, not a take-out
    assert (outcome.stop_reason or "").startswith("error rate 100% over the last 200 items")
    counts = await store.counts("job1")
    assert 200 <= counts[TaskState.FAILED] < 400
    assert counts[TaskState.PENDING] == 400 - counts[TaskState.FAILED]


def test_take_out_is_configured_under_circuit() -> None:
    base: dict[str, Any] = {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
        "routes": [{"model": MODEL, "targets": ["alpha"]}],
    }
    default = config_from_dict(base, source="gw.yaml").settings.circuit.take_out
    assert (default.after, default.max_outage_seconds, default.readmit_seconds) == (3, 1800.0, 300.0)
    off = {**base, "settings": {"circuit": {"take_out_after": 0, "max_outage": 0, "take_out_for": 0}}}
    take_out = config_from_dict(off, source="gw.yaml").settings.circuit.take_out
    assert (take_out.after, take_out.max_outage_seconds, take_out.readmit_seconds) == (0, 0.0, 0.0)
    older = {**base, "settings": {"circuit": {"take_out_grace": 45}}}  # max_outage's older name
    assert config_from_dict(older, source="gw.yaml").settings.circuit.take_out.max_outage_seconds == 45.0
    bad = {**base, "settings": {"circuit": {"take_out_after": -1}}}
    with pytest.raises(ConfigError, match=r"gw.yaml: settings.circuit.take_out_after: must be >= 0"):
        config_from_dict(bad, source="gw.yaml")
