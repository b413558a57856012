"""A key without access to one model, end to end through the engine (real HTTP on loopback, the
in-memory store): the provider's 403 `model_not_found` for that model (the emulator's
`refused_models`) takes out that (provider, model) target only. The provider's other models keep
serving; the refused model's requests fail at once, each with a clear error, never sent again
at the quota's pace — or, where the route has another target for the model, fail over to it. A
401 (the key refused whole) still takes out the whole provider (`test_engine_takeout.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import EngineHost
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskSpec, TaskState

from .factories import job

KEY = "sk-model-access-123456"
REFUSED, SERVED = "gpt-4o", "gpt-4o-mini"  # what alpha's key may not use / may use
CONCURRENCY = 16
N = 200


def _emulator(refusal: str = "403") -> Emulator:
    """alpha's key may not use REFUSED: OpenAI's 403 `model_not_found` (`refused_models`), or its
    404 `model_not_found` (a model the key does not see: `models`)."""
    latency = {"ttft_p50_ms": 5, "ttft_sigma": 0.1, "per_token_ms": 0}
    limits = {"rpm": 60_000, "tpm": 100_000_000}
    alpha: dict[str, Any] = {"name": "alpha", "api_key": KEY}
    alpha |= {"refused_models": [REFUSED]} if refusal == "403" else {"models": [SERVED]}
    providers = [
        {"family": "openai", "limits": limits, "latency": latency} | p for p in (alpha, {"name": "beta"})
    ]
    return Emulator(emulator_config_from_dict({"seed": 5, "providers": providers}))


def _config(big_targets: list[str]) -> GatewayConfig:
    """Route `big` to `big_targets`, route `small` to alpha's model that its key may use."""
    providers = [
        {"name": n, "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": KEY}
        for n in ("alpha", "beta")
    ]
    data: dict[str, Any] = {
        "providers": providers,
        "routes": [
            {"model": "big", "targets": big_targets},
            {"model": "small", "targets": [f"alpha:{SERVED}"]},
        ],
        "settings": {
            "concurrency": CONCURRENCY,
            "retry": {"max_attempts": 8, "base_delay": 0.01, "max_delay": 0.05},
            "timeouts": {"hedge": False},  # one send a request: what reached the emulator is counted
        },
        "job": {"error_rate_threshold": None},  # half the items fail here, by design
    }
    return config_from_dict(data, source="test.yaml")


def _spec(i: int) -> TaskSpec:
    model = "big" if i % 2 else "small"
    body = {"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": f"item {i}"}]}
    return TaskSpec(seq=i, line_no=i + 1, custom_id=f"{model}-{i}", body=body)


async def _run(emu: Emulator, big_targets: list[str]) -> tuple[Any, MemoryJobStore]:
    store = MemoryJobStore()
    await store.create_job(job(task_total=N))
    await store.add_tasks("job1", [_spec(i) for i in range(N)])
    urls = {n: emu.base_url(n) for n in ("alpha", "beta")}
    outcome = await JobEngine(_config(big_targets), store, "job1", host=EngineHost(base_urls=urls)).run()
    return outcome, store


@pytest.mark.parametrize("refusal", ["403", "404"])
async def test_a_refused_model_fails_fast_and_the_providers_other_model_still_serves(refusal: str) -> None:
    async with _emulator(refusal) as emu:
        outcome, store = await _run(emu, [f"alpha:{REFUSED}"])
        alpha = emu.stats()["providers"]["alpha"]
    assert outcome.status == "completed", outcome.stop_reason
    assert not outcome.no_target
    assert outcome.statistics.providers["alpha"].circuit != "out"  # the provider is not taken out
    records = [r async for r in store.iter_results("job1", ordered=True)]
    small = [r for r in records if r.custom_id.startswith("small")]
    big = [r for r in records if r.custom_id.startswith("big")]
    assert {r.state for r in small} == {TaskState.SUCCEEDED}
    assert alpha["completed"] >= N // 2  # more if a slow answer timed out and was sent again
    assert {r.state for r in big} == {TaskState.FAILED}
    assert {r.attempts for r in big} <= {0, 1}  # never retried; once the target is out, never sent
    sent = alpha["rejected"]["model_refused" if refusal == "403" else "unknown_model"]
    assert 1 <= sent <= CONCURRENCY  # the first wave; the rest never sent
    for r in big:
        assert "model_not_found" in (r.error or ""), r.error
        assert REFUSED in (r.error or ""), r.error
        assert KEY not in (r.error or "")


async def test_a_model_refused_on_one_provider_fails_over_to_the_routes_other_target() -> None:
    async with _emulator() as emu:
        outcome, store = await _run(emu, [f"alpha:{REFUSED}", f"beta:{REFUSED}"])
        stats = emu.stats()["providers"]
    assert outcome.status == "completed", outcome.stop_reason
    assert (await store.counts("job1"))[TaskState.SUCCEEDED] == N
    assert stats["alpha"]["completed"] >= N // 2  # its model that the key may use
    assert stats["beta"]["completed"] >= N // 2  # every `big` item
    assert stats["alpha"]["rejected"]["model_refused"] <= CONCURRENCY
