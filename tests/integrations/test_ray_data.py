"""Ray Data's `map_batches` through `BatchgateUDF`: several actors on a local Ray instance send a
dataset's rows over real HTTP to the emulator, holding one rpm limit together through Redis;
failed requests come back as rows with `error` set, never as a failed batch."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import orjson
import pytest

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from redisutil import BASE_URL, drop_namespace, fresh_namespace, require_redis

pytestmark = [
    pytest.mark.integration,
    pytest.mark.redis,
    pytest.mark.slow,  # a local Ray starts
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),  # Ray's own, about its own settings
]

RPM = 1200  # 20 requests/s: 60 rows take about three seconds at the limit


@pytest.fixture
def emu() -> Iterator[EmulatorThread]:
    provider = {
        "name": "p",
        "family": "openai",
        "limits": {"rpm": RPM, "tpm": 10**8},
        "latency": {"ttft_p50_ms": 40, "ttft_sigma": 0.2, "per_token_ms": 0},
        "reject_fields": ["logprobs"],  # a 400, as a strict provider answers a field it does not know
    }
    thread = EmulatorThread(emulator_config_from_dict({"seed": 5, "providers": [provider]}))
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()


@pytest.fixture
def namespace() -> Iterator[str]:
    require_redis()
    name = fresh_namespace()
    try:
        yield name
    finally:
        drop_namespace(name)


def _config(emu: EmulatorThread) -> dict[str, Any]:
    return {
        "providers": [
            {
                "name": "p",
                "kind": "openai",
                "base_url": emu.base_url("p"),
                "api_key": "sk-ray-test",
                "limits": {"rpm": RPM},
            }
        ],
        "routes": [{"model": "m", "targets": ["p"]}],
        "settings": {"retry": {"base_delay": 0.01, "max_delay": 0.2}},
    }


def _request(i: int, **extra: Any) -> bytes:
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": f"echo row {i}"}],
        **extra,
    }
    return orjson.dumps(body)


def _rows() -> tuple[list[dict[str, Any]], set[int]]:
    rows, bad = [], set()
    for i in range(60):
        request = _request(i).decode()
        if i % 20 == 3:  # refused by the provider
            request = _request(i, logprobs=True).decode()
        elif i % 20 == 7:  # not JSON at all
            request = "{not json"
        elif i == 11:  # a model no route serves
            request = orjson.dumps({"model": "nope", "messages": [{"role": "user", "content": "x"}]}).decode()
        else:
            rows.append({"id": i, "request": request})
            continue
        rows.append({"id": i, "request": request})
        bad.add(i)
    return rows, bad


def _rate_limited(emu: EmulatorThread) -> tuple[int, int]:
    """The provider's 429s, and every answer it gave (400s included)."""
    stats = emu.stats()["providers"]["p"]
    return int(stats["rejected"]["rate_limit"]), int(stats["completed"]) + int(
        sum(stats["rejected"].values())
    )


def test_actors_share_one_limit_through_redis_and_failures_are_rows(
    ray_local: ModuleType, emu: EmulatorThread, namespace: str
) -> None:
    rows, bad = _rows()
    udf_args = {"config": _config(emu), "quota": BASE_URL, "namespace": namespace}
    from batchgate.integrations.ray import BatchgateUDF  # noqa: PLC0415 — after the Ray fixture

    ds = ray_local.data.from_items(rows, override_num_blocks=6)
    out = ds.map_batches(
        BatchgateUDF,
        fn_constructor_kwargs=udf_args,
        compute=ray_local.data.ActorPoolStrategy(size=3),
        num_cpus=0.25,
        batch_size=10,
        batch_format="pandas",
    ).take_all()

    assert sorted(r["id"] for r in out) == list(range(60))  # every row once
    for r in out:
        if r["id"] in bad:
            assert r["answer"] is None, r
            assert r["error"], r
        else:
            assert r["error"] is None, r
            assert r["answer"], r
            assert r["provider"] == "p"
            assert r["usage"]["completion_tokens"] > 0
    errors = {r["id"]: r["error"] for r in out if r["id"] in bad}
    assert errors[3].startswith("bad_request: p: HTTP 400"), errors[3]
    assert "logprobs" in errors[3]
    assert "nope" in errors[11], errors[11]
    assert errors[7].startswith("input: the request column is not JSON")
    limited, answered = _rate_limited(emu)
    assert limited <= 0.005 * answered, (limited, answered)  # one limit held by three actors


def test_numpy_batches_of_prompts_come_back_with_answers(
    ray_local: ModuleType, emu: EmulatorThread, namespace: str
) -> None:
    udf_args = {
        "config": _config(emu),
        "quota": BASE_URL,
        "namespace": namespace,
        "model": "m",
        "max_tokens": 8,
    }
    from batchgate.integrations.ray import BatchgateUDF  # noqa: PLC0415 — after the Ray fixture

    ds = ray_local.data.from_items([{"id": i, "prompt": f"echo prompt {i}"} for i in range(20)])
    out = ds.map_batches(
        BatchgateUDF,
        fn_constructor_kwargs=udf_args,
        compute=ray_local.data.ActorPoolStrategy(size=2),
        num_cpus=0.25,
        batch_size=5,
    ).take_all()

    assert sorted(r["id"] for r in out) == list(range(20))
    assert all(r["error"] is None and r["answer"] and r["provider"] == "p" for r in out), out
    assert all(r["usage"]["prompt_tokens"] > 0 for r in out)
    assert _rate_limited(emu)[0] == 0
