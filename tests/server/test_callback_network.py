"""Callbacks on real networks: a 307 followed only to a URL the SSRF guard passes again, and a
callback through a real HTTP proxy (`proxy.py`, with Basic credentials) where the proxy is told
the address the guard checked, never the name (the name here is one only the guard's lookup
knows, so a proxy resolving it itself could not deliver)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from batchgate.config import NetworkSettings, ProxyURL
from batchgate.config.schema import Secret
from batchgate.webhooks import guard, signing
from batchgate.webhooks.sender import send
from netutil import real_proxy

from .hooks import Receiver, receiving

ALLOW = guard.parse_allow(["127.0.0.1"])


async def _lookup(host: str, port: int) -> list[str]:
    if host != "hooks.invalid":
        raise OSError(f"{host} is not mapped")
    return ["127.0.0.1"]


async def _send(receiver: Receiver, network: NetworkSettings | None = None) -> str:
    body = signing.event_body("evt_1", "batch.completed", 1, "batch_1")
    url = f"http://hooks.invalid:{receiver.port}/hook"
    secret = Secret(signing.new_secret())
    attempt = await send(
        url, "evt_1", body, secret, 1, allow=ALLOW, timeout_s=5, lookup=_lookup, network=network
    )
    return attempt.outcome if attempt.reason is None else f"{attempt.outcome}: {attempt.reason}"


async def test_a_307_is_followed_where_the_guard_passes_the_new_url() -> None:
    with receiving(307, 200, location="/moved") as receiver:
        assert await _send(receiver) == "delivered"
        first, second = receiver.wait(2)
    assert second.body == first.body  # the same event, POSTed again
    assert second.headers["webhook-signature"] == first.headers["webhook-signature"]


async def test_a_307_to_a_refused_address_is_refused_not_followed() -> None:
    with receiving(307, location="http://10.0.0.1/internal") as receiver:
        outcome = await _send(receiver)
        assert len(receiver.deliveries) == 1
    assert outcome == "refused: 10.0.0.1 is a private address; not allow-listed"


@pytest.fixture(scope="module")
def proxy_port() -> Iterator[int]:
    with real_proxy(basic_auth="hook:pr0xy-pw") as port:
        yield port


@pytest.mark.parametrize(("password", "delivered"), [("pr0xy-pw", True), ("wrong", False)])
async def test_a_callback_goes_through_the_proxy_to_the_checked_address(
    proxy_port: int, password: str, delivered: bool
) -> None:
    proxy = ProxyURL("http", "127.0.0.1", proxy_port, "hook", password)
    network = NetworkSettings(https_proxy=proxy, http_proxy=proxy)
    with receiving(200) as receiver:
        outcome = await _send(receiver, network)
        if delivered:
            [delivery] = receiver.wait(1)
            assert delivery.headers["host"] == f"hooks.invalid:{receiver.port}"
    if delivered:
        assert outcome == "delivered"
    else:  # the proxy refused: so every delivery goes through it
        assert outcome == "http_error: answered HTTP 407"
        assert receiver.deliveries == []
    assert "pr0xy-pw" not in outcome
