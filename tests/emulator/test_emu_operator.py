"""Operator endpoints, routing, bad-input floods, body limits, and the thread and process runners."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from batchgate.emulator import Emulator, EmulatorConfig, EmulatorProcess, EmulatorThread, load_emulator_config
from batchgate.errors import ConfigError

ProviderFactory = Callable[..., dict[str, Any]]
ConfigFactory = Callable[..., EmulatorConfig]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "emulator.yaml"
JSON = {"Content-Type": "application/json"}


def body(content: str, **extra: Any) -> bytes:
    return orjson.dumps(
        {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 5, **extra}
    )


@pytest.mark.integration
async def test_stats_count_admissions_tokens_duplicates_and_series_then_reset(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    async with Emulator(make_config(make_provider("alpha"))) as emu, aiohttp.ClientSession() as session:
        url = emu.base_url("alpha") + "/chat/completions"
        for content in ("one", "two", "one"):  # "one" is sent twice after completing once
            async with session.post(url, data=body(content), headers=JSON) as response:
                assert response.status == 200
        async with session.post(url, data=b"{nope", headers=JSON) as response:
            assert response.status == 400
        async with session.get(f"{emu.url}/_emulator/stats") as response:
            stats = orjson.loads(await response.read())
        alpha = stats["providers"]["alpha"]
        assert (alpha["admitted"], alpha["completed"], alpha["duplicates"]) == (3, 3, 1)
        assert alpha["rejected"]["invalid"] == 1
        assert alpha["tokens_charged"]["output"] == 15
        assert alpha["tokens_charged"]["total"] == alpha["tokens_charged"]["input"] + 15
        assert sum(point[1] for point in alpha["series"]) == 3
        assert sum(point[2] for point in alpha["series"]) == alpha["tokens_charged"]["total"]
        assert stats == emu.stats()
        async with session.post(f"{emu.url}/_emulator/reset") as response:
            assert response.status == 200
        after = emu.stats()["providers"]["alpha"]
        assert (after["admitted"], after["duplicates"], after["series"]) == (0, 0, [])
        async with session.post(url, data=body("one"), headers=JSON) as response:
            assert response.status == 200
        assert emu.stats()["providers"]["alpha"]["duplicates"] == 0  # reset forgot what was completed


@pytest.mark.integration
async def test_received_lists_each_providers_prompts_in_arrival_order_only_when_asked(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    limited = make_provider("beta", limits={"rpm": 1, "tpm": 100_000})  # its second request gets a 429
    cfg = make_config(make_provider("alpha"), limited, record_prompts=True)
    async with Emulator(cfg) as emu, aiohttp.ClientSession() as session:
        statuses = []
        for name, content in (
            ("alpha", "one"),
            ("beta", "b1"),
            ("alpha", "two"),
            ("beta", "b2"),
            ("alpha", "one"),
        ):
            url = emu.base_url(name) + "/chat/completions"
            async with session.post(url, data=body(content), headers=JSON) as response:
                statuses.append(response.status)
        async with session.post(emu.base_url("alpha") + "/chat/completions", data=b"{nope") as response:
            assert response.status == 400  # not parsed: not listed
        async with session.get(f"{emu.url}/_emulator/received") as response:
            received = orjson.loads(await response.read())["providers"]
        assert statuses == [200, 200, 200, 429, 200]
        assert received == {"alpha": ["one", "two", "one"], "beta": ["b1", "b2"]}  # the 429'd one too
        emu.reset()
        assert emu.received == {"alpha": [], "beta": []}
    async with Emulator(make_config(make_provider("alpha"))) as emu, aiohttp.ClientSession() as session:
        async with session.post(emu.base_url("alpha") + "/chat/completions", data=body("x"), headers=JSON):
            pass
        assert emu.received == {"alpha": []}  # not recorded unless the config asks


@pytest.mark.integration
async def test_routing_errors_have_the_right_shapes(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    cfg = make_config(make_provider("alpha"), make_provider("gamma", "anthropic"))
    async with Emulator(cfg) as emu, aiohttp.ClientSession() as session:
        async with session.post(f"{emu.url}/nobody/v1/chat/completions", data=body("x")) as response:
            assert response.status == 404
            error = orjson.loads(await response.read())["error"]
            assert error["type"] == "invalid_request_error"
            assert error["message"] == "Invalid URL (POST /nobody/v1/chat/completions)"
        async with session.post(f"{emu.url}/alpha/v1/messages", data=body("x")) as response:
            assert response.status == 404  # an OpenAI provider does not serve Messages
            assert "error" in orjson.loads(await response.read())
        async with session.post(f"{emu.url}/gamma/v1/chat/completions", data=body("x")) as response:
            assert response.status == 404
            assert orjson.loads(await response.read())["error"]["type"] == "not_found_error"
        async with session.get(f"{emu.url}/alpha/v1/chat/completions") as response:
            assert response.status == 404
        assert emu.stats()["unrouted"] == 1


@pytest.mark.integration
async def test_body_over_the_limit_is_413_in_the_familys_shape(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    cfg = make_config(make_provider("alpha"), make_provider("gamma", "anthropic"), max_body_bytes=100_000)
    huge = body("x" * 200_000)

    async def chunks() -> Any:
        for i in range(0, len(huge), 16_384):
            yield huge[i : i + 16_384]

    async with Emulator(cfg) as emu, aiohttp.ClientSession() as session:
        async with session.post(
            emu.base_url("alpha") + "/chat/completions", data=huge, headers=JSON
        ) as response:
            assert response.status == 413
            assert orjson.loads(await response.read())["error"]["code"] == "request_too_large"
        headers = {**JSON, "anthropic-version": "2023-06-01"}
        async with session.post(
            emu.base_url("gamma") + "/v1/messages", data=chunks(), headers=headers
        ) as response:
            assert response.status == 413  # chunked, no content-length: caught while reading
            assert orjson.loads(await response.read())["error"]["type"] == "request_too_large"
        async with session.post(
            emu.base_url("alpha") + "/chat/completions", data=body("ok"), headers=JSON
        ) as r:
            assert r.status == 200
        assert emu.stats()["providers"]["alpha"]["rejected"]["too_large"] == 1


BAD_REQUESTS: list[tuple[str, bytes]] = [
    ("/alpha/v1/chat/completions", b"{not json"),
    ("/alpha/v1/chat/completions", b""),
    ("/alpha/v1/chat/completions", b"[]"),
    ("/alpha/v1/chat/completions", b'{"model": "m"}'),
    ("/alpha/v1/chat/completions", b'{"model": "m", "messages": []}'),
    ("/alpha/v1/chat/completions", b'{"model": "m", "messages": [{"role": "x", "content": "y"}]}'),
    ("/alpha/v1/chat/completions", b'{"model": "m", "messages": [{"role": "user", "content": 1}]}'),
    (
        "/alpha/v1/chat/completions",
        b'{"model": "m", "messages": [{"role": "user", "content": "y"}], "max_tokens": -1}',
    ),
    ("/alpha/v1/chat/completions", b'{"model": "m", "messages": "\xff\xfe"}'),
    ("/gamma/v1/messages", b'{"model": "c", "messages": [{"role": "user", "content": "y"}]}'),
    (
        "/gamma/v1/messages",
        b'{"model": "c", "max_tokens": 9, "messages": [{"role": "assistant", "content": "y"}]}',
    ),
    ("/nobody/v1/chat/completions", b"{}"),
    ("/alpha/v2/whatever", b"{}"),
]


@pytest.mark.slow
@pytest.mark.integration
async def test_a_flood_of_bad_requests_leaves_the_server_serving(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    cfg = make_config(make_provider("alpha"), make_provider("gamma", "anthropic"))
    async with Emulator(cfg) as emu, aiohttp.ClientSession() as session:
        headers = {**JSON, "anthropic-version": "2023-06-01"}
        statuses: list[int] = []

        async def send(i: int) -> None:
            path, data = BAD_REQUESTS[i % len(BAD_REQUESTS)]
            async with session.post(f"{emu.url}{path}", data=data, headers=headers) as response:
                await response.read()
                statuses.append(response.status)

        for start in range(0, 2000, 100):
            await asyncio.gather(*(send(i) for i in range(start, start + 100)))
        async with session.post(
            emu.base_url("alpha") + "/chat/completions", data=body("still here"), headers=JSON
        ) as r:
            assert r.status == 200
            assert orjson.loads(await r.read())["choices"][0]["message"]["content"] == "echo: still here"
        stats = emu.stats()
    assert len(statuses) == 2000
    assert set(statuses) == {400, 404}
    alpha = stats["providers"]["alpha"]
    assert alpha["admitted"] == 1
    assert alpha["series"][0][1] == 1  # bad requests leave no trace but counters
    assert alpha["rejected"]["invalid"] + stats["providers"]["gamma"]["rejected"]["invalid"] > 1500


def test_emulator_thread_serves_the_sync_sdk() -> None:

    with EmulatorThread(load_emulator_config(EXAMPLE)) as emu:
        client = openai.OpenAI(base_url=emu.base_url("alpha"), api_key="x", max_retries=0)
        with client:
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Classify the sentiment: awful, broken"}]
            )
        assert reply.choices[0].message.content == "negative"
        assert emu.stats()["providers"]["alpha"]["completed"] == 1
        emu.reset()
        assert emu.stats()["providers"]["alpha"]["completed"] == 0
        assert emu.base_url("gamma") == f"{emu.url}/gamma"


@pytest.mark.acceptance
def test_emulator_process_runs_the_cli_and_stops_cleanly() -> None:
    process = EmulatorProcess(EXAMPLE)
    with process as emu:
        client = openai.OpenAI(base_url=emu.base_url("alpha"), api_key="x", max_retries=0)
        with client:
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "echo: hi"
        assert emu.stats()["providers"]["alpha"]["completed"] == 1
    assert process.returncode == 0  # SIGTERM is a clean stop


@pytest.mark.acceptance
def test_emulator_process_lists_received_prompts_and_rejects_a_non_boolean_switch(tmp_path: Path) -> None:
    path = tmp_path / "emu.yaml"
    path.write_text(
        "record_prompts: true\nproviders:\n  - name: alpha\n    family: openai\n", encoding="utf-8"
    )
    with EmulatorProcess(path) as emu:
        client = openai.OpenAI(base_url=emu.base_url("alpha"), api_key="x", max_retries=0)
        with client:
            for content in ("a", "b", "a"):
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
        assert emu.received() == {"alpha": ["a", "b", "a"]}
    path.write_text("record_prompts: 1\nproviders:\n  - name: alpha\n    family: openai\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="record_prompts: must be true or false"):
        load_emulator_config(path)


@pytest.mark.acceptance
def test_cli_rejects_a_bad_config_with_the_key(tmp_path: Path) -> None:
    path = tmp_path / "emu.yaml"
    path.write_text(
        "providers:\n  - name: alpha\n    family: openai\n    limits: {rpm: -3}\n", encoding="utf-8"
    )
    result = subprocess.run(
        [sys.executable, "-m", "batchgate", "emulate", "--config", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert f"{path}: providers[0].limits.rpm: must be >= 1" in result.stderr
    assert "Traceback" not in result.stderr
