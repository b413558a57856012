"""The pooled aiohttp session every provider client shares, built for throughput.

One `ClientSession` per gateway: a `TCPConnector` with no per-host cap (the quota pool and the
scheduler decide concurrency, not the pool), keep-alive, a DNS cache, no cookie jar (API calls are
stateless; a jar would only cost CPU and leak state between providers), `raise_for_status` off
(status codes are classified by `batchgate.providers.classify`), orjson for any `json=` use, and
a connector that tells the quota pool when a request's bytes leave (`batchgate.providers.wire`).
The clients themselves serialise with orjson to bytes and parse the bytes they read.

`send` is the one place bytes go out and come back, for chat and Batch API calls alike: it turns
every transport failure into a
`TransportError` (a hung call into `RequestTimeout`, after which aiohttp closes the connection
rather than returning it to the pool) and leaves status codes to the caller.

Each request passes its own `aiohttp.ClientTimeout` (`request_timeout`); the session default only
bounds connecting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson
from multidict import CIMultiDictProxy

from batchgate.config import Secret, TimeoutConfig
from batchgate.providers.classify import error_for_exception
from batchgate.providers.wire import WireConnector

KEEPALIVE_SECONDS = 30.0
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}  # a chat call's
DNS_CACHE_SECONDS = 300


def _json_serialize(obj: Any) -> str:
    return orjson.dumps(obj).decode()


def create_session(*, connect_timeout: float, limit: int = 0) -> aiohttp.ClientSession:
    """A pooled session; `limit` caps open connections in total (0: no cap).

    Call it from a running event loop (aiohttp binds the connector to it); close it with
    `await session.close()` or `async with`.
    """
    connector = WireConnector(
        limit=limit,
        limit_per_host=0,
        use_dns_cache=True,
        ttl_dns_cache=DNS_CACHE_SECONDS,
        keepalive_timeout=KEEPALIVE_SECONDS,
    )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        json_serialize=_json_serialize,
        raise_for_status=False,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout),
        auto_decompress=True,
        trust_env=False,
    )


def request_timeout(timeouts: TimeoutConfig) -> aiohttp.ClientTimeout:
    """The per-request timeout: `total` for the whole call, `connect` for opening the socket."""
    return aiohttp.ClientTimeout(total=timeouts.total, sock_connect=timeouts.connect)


async def send(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    data: bytes | aiohttp.FormData | None,
    headers: Mapping[str, str],
    client_timeout: aiohttp.ClientTimeout,
    *,
    provider: str,
    api_key: Secret | None,
) -> tuple[int, CIMultiDictProxy[str], bytes]:
    """Send one request; (status, headers, body bytes), or a `TransportError` without the API key."""
    try:
        async with session.request(
            method, url, data=data, headers=headers, timeout=client_timeout, allow_redirects=False
        ) as resp:
            raw = await resp.read()
            return resp.status, resp.headers, raw
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise error_for_exception(exc, provider=provider, api_key=api_key) from None
