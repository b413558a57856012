"""The chat transport a config chooses (`settings.transport`, a provider entry's `transport`): a
gateway built from it really sends through it, against the embedded emulator over loopback HTTP;
h1 is the default; a bad value is one line naming its key; a streamed request over aiohttp (whose
answers are read whole) is refused naming the setting."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate import Gateway
from batchgate.config import config_from_dict
from batchgate.errors import BadRequestError, ConfigError
from batchgate.providers.h1 import H1Transport
from batchgate.providers.http import SessionTransport

FAST = {"ttft_p50_ms": 0, "per_token_ms": 0}
ASK = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "Summarize: a fox"}]}


def _config(settings: dict[str, Any] | None = None, **entry: Any) -> Any:
    data = {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": "emulator", **entry}],
        "routes": [{"model": "m", "targets": ["alpha:gpt-4o-mini"]}],
        "emulator": {"providers": [{"name": "alpha", "family": "openai", "latency": FAST}]},
        "settings": settings or {},
    }
    return config_from_dict(data, source="test.yaml", environ={})


def _transport(gw: Gateway) -> object:
    return gw.runtimes["alpha"].client._transport  # type: ignore[attr-defined]


async def test_a_config_choosing_aiohttp_sends_through_an_aiohttp_session() -> None:
    async with Gateway(_config({"transport": "aiohttp"})) as gw:
        transport = _transport(gw)
        results = await gw.abatch([ASK] * 3)
        assert gw.emulator is not None
        admitted = gw.emulator.stats()["providers"]["alpha"]["admitted"]
    assert isinstance(transport, SessionTransport)
    assert [r.ok for r in results] == [True] * 3, [r.error for r in results]
    assert admitted == 3
    assert transport.session.closed  # the gateway's close closed the session it made


async def test_h1_is_the_default_and_an_entry_overrides_the_settings() -> None:
    async with Gateway(_config()) as gw:
        assert isinstance(_transport(gw), H1Transport)
        assert (await gw.arun(ASK)).ok
    async with Gateway(_config({"transport": "aiohttp"}, transport="h1")) as gw:
        assert isinstance(_transport(gw), H1Transport)
    async with Gateway(_config(transport="aiohttp")) as gw:
        assert isinstance(_transport(gw), SessionTransport)


def test_settings_transport_holds_for_an_entry_that_ignores_the_environment() -> None:
    net = _config({"transport": "aiohttp"}, trust_env=False, proxy="http://p:3128").providers[0].network
    assert (net.transport, net.trust_env) == ("aiohttp", False)
    assert net.https_proxy is not None


@pytest.mark.parametrize(
    ("settings", "entry", "key"),
    [
        ({"transport": "httpx"}, {}, "settings.transport"),
        ({}, {"transport": 2}, "providers[0].transport"),
        ({}, {"transport": "HTTP2"}, "providers[0].transport"),
    ],
)
def test_a_bad_transport_is_one_line_naming_the_key(
    settings: dict[str, Any], entry: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(settings, **entry)
    assert caught.value.key == key
    assert "must be one of h1, aiohttp" in str(caught.value)
    assert "\n" not in str(caught.value)


async def test_a_streamed_request_over_aiohttp_is_refused_naming_the_setting() -> None:
    async with Gateway(_config({"transport": "aiohttp"})) as gw:
        with pytest.raises(BadRequestError) as caught:
            async for _ in gw.stream_chat(ASK):
                pass
    assert "transport: h1" in caught.value.message
