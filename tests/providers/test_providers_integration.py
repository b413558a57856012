"""The provider clients over real loopback sockets against the emulator: successes and every fault."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.errors import (
    AuthenticationError,
    ConnectError,
    MalformedResponse,
    OverloadedError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTimeout,
    ServerError,
    UnreachableError,
)
from batchgate.providers import ProviderClient, make_chat_client
from transports import chat_transport, each_transport  # noqa: F401 (the fixture)

pytestmark = [
    pytest.mark.integration,
    # bpe-openai (the emulator's token counter) uses importlib.resources.open_binary, deprecated in 3.11.
    pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning"),
]

BODY: dict[str, Any] = {
    "model": "ignored",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello to the world."},
    ],
    "max_tokens": 16,
}
FAULT_KINDS = (
    "server_error", "overloaded", "rate_limit_no_hint", "retry_after_date", "hang", "reset", "truncated",
    "non_json", "insufficient_quota",
)  # fmt: skip


def provider_spec(
    name: str,
    family: str,
    *,
    limits: dict[str, int] | None = None,
    api_key: str | None = None,
    faults: dict[str, float] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "family": family,
        "api_key": api_key,
        "limits": limits or {"rpm": 100000},
        "latency": {"ttft_p50_ms": 0, "per_token_ms": 0},
        "faults": {**dict.fromkeys(FAULT_KINDS, 0.0), **(faults or {})},
    }


@asynccontextmanager
async def serve(
    *specs: dict[str, Any], total: float = 10.0, limit: int = 0, client_keys: dict[str, str] | None = None
) -> AsyncIterator[dict[str, ProviderClient]]:
    """Clients (by provider name) talking to an emulator that serves `specs`."""
    config = emulator_config_from_dict({"seed": 1, "window_seconds": 1.0, "providers": list(specs)})
    keys = client_keys or {}
    async with Emulator(config) as emu, chat_transport(limit=limit) as session:
        clients: dict[str, ProviderClient] = {}
        for spec in specs:
            name = spec["name"]
            key = keys.get(name, spec["api_key"])
            cfg = ProviderConfig(
                name=name, kind=spec["family"], base_url="emulator", api_key=Secret(key) if key else None,
                default_max_tokens=64,
            )  # fmt: skip
            timeouts = TimeoutConfig(connect=2.0, total=total)
            clients[name] = make_chat_client(cfg, session, timeouts, base_url=emu.base_url(name))
        yield clients


async def test_openai_success_with_usage_and_rate_limit_snapshot() -> None:
    async with serve(
        provider_spec("alpha", "openai", limits={"rpm": 600, "tpm": 100000}, api_key="sk-a")
    ) as c:
        client = c["alpha"]
        resp = await client.send(BODY, model="gpt-4o-mini")
    assert resp.status == 200
    assert resp.body["object"] == "chat.completion"
    assert resp.body["model"] == "gpt-4o-mini"
    assert isinstance(resp.body["choices"][0]["message"]["content"], str)
    usage = resp.body["usage"]
    assert resp.usage.prompt_tokens == usage["prompt_tokens"] > 0
    assert resp.usage.completion_tokens == usage["completion_tokens"] > 0
    assert resp.request_id is not None
    assert resp.request_id == resp.headers["x-request-id"]
    snap = client.rate_limits(resp.headers, time.time())
    assert snap.limit_requests == 600
    assert snap.limit_tokens == 100000
    assert snap.remaining_requests is not None
    assert snap.remaining_requests < 600
    assert snap.reset_requests is not None


async def test_anthropic_round_trip_translates_both_ways() -> None:
    spec = provider_spec(
        "gamma", "anthropic", limits={"rpm": 50, "itpm": 40000, "otpm": 8000}, api_key="ak-g"
    )
    async with serve(spec) as c:
        client = c["gamma"]
        assert client.kind == "anthropic"
        resp = await client.send(BODY, model="claude-3-5-haiku")
    body = resp.body
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("msg_")
    assert body["model"] == "claude-3-5-haiku"
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["message"]["content"]
    assert choice["finish_reason"] in ("stop", "length")
    assert resp.usage.prompt_tokens == body["usage"]["prompt_tokens"] > 0
    assert resp.usage.completion_tokens == body["usage"]["completion_tokens"] > 0
    assert body["usage"]["total_tokens"] == resp.usage.total_tokens
    assert resp.request_id == resp.headers["request-id"]
    snap = client.rate_limits(resp.headers, time.time())
    assert snap.limit_requests == 50
    assert snap.limit_input_tokens == 40000
    assert snap.limit_output_tokens == 8000
    assert snap.reset_requests is not None


async def test_max_tokens_default_reaches_anthropic() -> None:
    body = {"messages": [{"role": "user", "content": "Tell me a long story about rivers. " * 20}]}
    async with serve(provider_spec("gamma", "anthropic")) as c:
        resp = await c["gamma"].send(body, model="claude")
    assert 0 < resp.usage.completion_tokens <= 64  # the client's default_max_tokens


@pytest.mark.parametrize("family", ["openai", "anthropic"])
async def test_quota_exhaustion_is_a_rate_limit_error_with_hints(family: str) -> None:
    async with serve(provider_spec("p", family, limits={"rpm": 6})) as c:
        client = c["p"]
        await client.send(BODY, model="m")
        with pytest.raises(RateLimitError) as info:
            await client.send(BODY, model="m")
    err = info.value
    assert err.status == 429
    assert err.provider == "p"
    assert float(err.headers["retry-after-ms"]) > 0
    snap = client.rate_limits(err.headers, time.time())
    assert snap.limit_requests == 6
    assert snap.remaining_requests is not None


FAULTS: list[tuple[str, str, type[ProviderError]]] = [
    ("openai", "server_error", ServerError),
    ("anthropic", "server_error", ServerError),
    ("openai", "overloaded", ServerError),  # OpenAI says "overloaded" with a 503
    ("anthropic", "overloaded", OverloadedError),
    ("openai", "rate_limit_no_hint", RateLimitError),
    ("anthropic", "retry_after_date", RateLimitError),
    ("openai", "reset", ConnectError),
    ("anthropic", "reset", ConnectError),
    ("openai", "truncated", MalformedResponse),
    ("anthropic", "truncated", MalformedResponse),
    ("openai", "non_json", MalformedResponse),
    ("anthropic", "non_json", MalformedResponse),
    ("openai", "insufficient_quota", QuotaExhaustedError),
    ("anthropic", "insufficient_quota", QuotaExhaustedError),
]


@pytest.mark.parametrize(("family", "fault", "cls"), FAULTS)
async def test_each_fault_maps_to_its_error(family: str, fault: str, cls: type[ProviderError]) -> None:
    async with serve(provider_spec("p", family, faults={fault: 1.0})) as c:
        with pytest.raises(ProviderError) as info:
            await c["p"].send(BODY, model="m")
    assert type(info.value) is cls
    assert info.value.provider == "p"
    assert info.value.message.startswith("p: ")


@pytest.mark.timeout(30)  # fail fast if the client's total timeout is not applied
async def test_hang_times_out_and_frees_the_connection() -> None:
    specs = (provider_spec("stuck", "openai", faults={"hang": 1.0}), provider_spec("fine", "openai"))
    async with serve(*specs, total=0.3, limit=1) as c:
        with pytest.raises(RequestTimeout):
            await c["stuck"].send(BODY, model="m")
        # The pool holds one connection at most: this only succeeds if the hung one was released.
        resp = await c["fine"].send(BODY, model="m")
    assert resp.status == 200


@pytest.mark.parametrize("family", ["openai", "anthropic"])
async def test_wrong_key_is_an_authentication_error_without_the_key(family: str) -> None:
    wrong = "sk-wrong-key-ABCDEF0123456789"
    spec = provider_spec("p", family, api_key="sk-right-key")
    async with serve(spec, client_keys={"p": wrong}) as c:
        client = c["p"]
        with pytest.raises(AuthenticationError) as info:
            await client.send(BODY, model="m")
    err = info.value
    assert err.status == 401
    for text in (err.message, str(err), repr(err), repr(err.body), repr(dict(err.headers)), repr(client)):
        assert wrong not in text


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_connection_refused_is_unreachable(kind: str) -> None:
    cfg = ProviderConfig(name="gone", kind=kind, base_url=f"http://127.0.0.1:{closed_port()}/v1")  # type: ignore[arg-type]
    async with chat_transport() as session:
        client = make_chat_client(cfg, session, TimeoutConfig(connect=2.0, total=5.0))
        with pytest.raises(UnreachableError, match="gone: unreachable"):
            await client.send(BODY, model="m")


async def test_concurrent_requests_share_the_pool() -> None:
    async with serve(provider_spec("alpha", "openai")) as c:
        results = await asyncio.gather(*(c["alpha"].send(BODY, model="m") for _ in range(50)))
    assert len({r.request_id for r in results}) == 50
    assert all(r.usage.completion_tokens > 0 for r in results)
