"""What the clients put on the wire, and 2xx answers that must never pass as successes.

A small loopback aiohttp server records each request and answers with a canned response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web

from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.errors import BadRequestError, MalformedResponse
from batchgate.providers import ProviderClient, make_chat_client
from loopback import serving
from transports import chat_transport, each_transport  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("each_transport")]

KEY = "sk-wire-0123456789"
BODY: dict[str, Any] = {
    "model": "asked",
    "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
    "max_tokens": 9,
    "stop": "END",
}
OPENAI_OK = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4,
              "prompt_tokens_details": {"cached_tokens": 2}},
}  # fmt: skip
ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "max_tokens",
    "usage": {"input_tokens": 3, "output_tokens": 9, "cache_read_input_tokens": 4},
}


@dataclass
class Canned:
    """The next answer to give, and every request received."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    seen: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Canned]]:
    canned = Canned()

    async def handle(request: web.Request) -> web.Response:
        raw = await request.read()
        canned.seen.append((request.path, dict(request.headers), orjson.loads(raw)))
        return web.Response(status=canned.status, body=canned.body, headers=canned.headers)

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    async with serving(app) as url:
        yield url, canned


async def call(url: str, kind: str, body: dict[str, Any] = BODY) -> Any:
    cfg = ProviderConfig(
        name="p", kind=kind, base_url=url, api_key=Secret(KEY), headers={"X-Team": "t1"},  # type: ignore[arg-type]
        default_max_tokens=77,
    )  # fmt: skip
    async with chat_transport() as session:
        client: ProviderClient = make_chat_client(cfg, session, TimeoutConfig(connect=2.0, total=5.0))
        return await client.send(body, model="target")


async def test_openai_request_on_the_wire(server: tuple[str, Canned]) -> None:
    url, canned = server
    canned.body = orjson.dumps(OPENAI_OK)
    canned.headers["x-request-id"] = "rid-7"
    resp = await call(url + "/v1", "openai")
    path, headers, sent = canned.seen[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["X-Team"] == "t1"
    assert sent == {**BODY, "model": "target"}
    assert BODY["model"] == "asked"  # the caller's body is not modified
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.cached_tokens) == (3, 1, 2)
    assert resp.request_id == "rid-7"
    assert resp.body == OPENAI_OK


async def test_anthropic_request_on_the_wire(server: tuple[str, Canned]) -> None:
    url, canned = server
    canned.body = orjson.dumps(ANTHROPIC_OK)
    canned.headers["request-id"] = "req_9"
    resp = await call(url, "anthropic")
    path, headers, sent = canned.seen[0]
    assert path == "/v1/messages"
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in headers
    assert sent == {
        "model": "target",
        "max_tokens": 9,
        "system": "S",
        "messages": [{"role": "user", "content": "U"}],
        "stop_sequences": ["END"],
    }
    assert resp.body["choices"][0]["finish_reason"] == "length"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.cached_tokens) == (7, 9, 4)
    assert resp.request_id == "req_9"


OPENAI_BAD: list[bytes] = [
    b"",
    b"<html>ok</html>",
    orjson.dumps(OPENAI_OK)[:-10],
    b"[]",
    orjson.dumps({k: v for k, v in OPENAI_OK.items() if k != "usage"}),
    orjson.dumps({**OPENAI_OK, "choices": None}),
    orjson.dumps({**OPENAI_OK, "usage": {"prompt_tokens": "3", "completion_tokens": 1}}),
    orjson.dumps({**OPENAI_OK, "usage": {"prompt_tokens": 3, "completion_tokens": True}}),
]


@pytest.mark.parametrize("body", OPENAI_BAD)
async def test_openai_unusable_2xx_is_malformed(server: tuple[str, Canned], body: bytes) -> None:
    url, canned = server
    canned.body = body
    with pytest.raises(MalformedResponse) as info:
        await call(url + "/v1", "openai")
    assert info.value.status == 200
    assert info.value.message.startswith("p: HTTP 200 ")


ANTHROPIC_BAD: list[bytes] = [
    b"not json",
    b'"a string"',
    orjson.dumps({**ANTHROPIC_OK, "usage": {}}),
    orjson.dumps({k: v for k, v in ANTHROPIC_OK.items() if k != "content"}),
]


@pytest.mark.parametrize("body", ANTHROPIC_BAD)
async def test_anthropic_unusable_2xx_is_malformed(server: tuple[str, Canned], body: bytes) -> None:
    url, canned = server
    canned.body = body
    with pytest.raises(MalformedResponse):
        await call(url, "anthropic")


async def test_a_redirect_loop_stops_after_five_hops(server: tuple[str, Canned]) -> None:
    url, canned = server
    canned.status = 307  # every path answers 307 to /elsewhere: followed, with its body, 5 times
    canned.headers["Location"] = url + "/elsewhere"
    with pytest.raises(BadRequestError, match=r"HTTP 307 redirect to http://.*/elsewhere not followed: 5"):
        await call(url + "/v1", "openai")
    assert len(canned.seen) == 6
    assert [path for path, *_ in canned.seen[1:]] == ["/elsewhere"] * 5
    assert canned.seen[-1][-1] == canned.seen[0][-1]  # the same body each time


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("openai", {**BODY, "stream": True}),
        ("anthropic", {**BODY, "n": 3}),
        ("anthropic", {"messages": [{"role": "assistant", "content": "x"}]}),
    ],
)
async def test_refused_requests_are_never_sent(
    server: tuple[str, Canned], kind: str, body: dict[str, Any]
) -> None:
    url, canned = server
    with pytest.raises(BadRequestError):
        await call(url + "/v1", kind, body)
    assert canned.seen == []
