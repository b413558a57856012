"""The seam between a provider client and the wire: `ChatTransport`, and `call`, which sends one
request through one and turns every failure of the transport into a `TransportError`.

Which one a provider's calls go through is its config's `transport:` (`settings.transport`, or
the entry's), built from its `NetworkSettings` by `batchgate.providers.network.chat_transport`:
the lean HTTP/1.1 client (`batchgate.providers.h1.H1Transport`) by default, or an aiohttp session
(`batchgate.providers.http.SessionTransport`, whose failures come out as the lean client's types).
Every one passes the same suite (`tests/providers/test_transport_conformance.py`). Nothing here
imports aiohttp: a gateway on h1 never loads it (~0.2 s of start-up) unless something else needs
it. With tracing on, `call` adds the request's `traceparent` (`batchgate.trace_hooks.TRACEPARENT`)
to its headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from batchgate.config import Secret, TimeoutConfig
from batchgate.providers.classify import error_for_exception
from batchgate.providers.h1.errors import H1Error
from batchgate.providers.h1.parser import Response
from batchgate.providers.redirects import follow
from batchgate.trace_hooks import TRACEPARENT

Answer = Response  # status, headers (case-insensitive), body


class ChatTransport(Protocol):
    """Carries a provider client's calls: one request out, (status, headers, body) back."""

    async def request(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: Mapping[str, str],
        *,
        total: float | None,
        connect: float | None,
    ) -> Answer:
        """One exchange; a failure raises the transport's own exception (`call` classifies it)."""
        ...

    async def close(self) -> None:
        """Close what the transport holds open."""
        ...


async def call(
    transport: ChatTransport,
    method: str,
    url: str,
    data: bytes | None,
    headers: Mapping[str, str],
    timeouts: TimeoutConfig,
    *,
    provider: str,
    api_key: Secret | None,
) -> Answer:
    """Send one request through `transport`; (status, headers, body bytes), or a `TransportError`
    without the API key. Redirects are followed or refused as `providers.redirects` says."""

    if (traceparent := TRACEPARENT.get()) is not None:  # tracing on: the request's span is the parent
        headers = {**headers, "traceparent": traceparent}

    async def exchange(method: str, url: str, with_body: bool) -> Answer:
        try:
            body = data if with_body else None
            return await transport.request(
                method, url, body, headers, total=timeouts.total, connect=timeouts.connect
            )
        except (H1Error, TimeoutError, OSError) as exc:
            raise error_for_exception(exc, provider=provider, api_key=api_key) from None

    return await follow(exchange, method, url, provider=provider, api_key=api_key)
