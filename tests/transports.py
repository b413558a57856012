"""The `ChatTransport`s the provider clients' tests run over, one after the other: each a config can
choose (`TRANSPORTS`: the lean HTTP/1.1 client, the default, and an aiohttp session), built as a
gateway builds them (`providers.network.chat_transport` from one `NetworkSettings`).

A module opts in with `pytestmark = pytest.mark.usefixtures("each_transport")` (and imports the
fixture); its helpers open `chat_transport()`, which is the one of the current parameter.
`tests/providers/test_transport_conformance.py` holds what every transport must do alike."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from batchgate.config import NetworkSettings
from batchgate.config.network import TRANSPORTS, TransportName
from batchgate.providers.http import SessionTransport, create_session
from batchgate.providers.network import chat_transport as build
from batchgate.providers.transport import ChatTransport

_current: list[TransportName] = ["h1"]


@pytest.fixture(params=TRANSPORTS)
def each_transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test once over each transport."""
    _current[0] = request.param
    yield request.param
    _current[0] = "h1"


@asynccontextmanager
async def chat_transport(*, limit: int = 0) -> AsyncIterator[ChatTransport]:
    """The current transport, open for a block (`limit`: an aiohttp session capped at that many
    connections, to show a hung call's connection is released; h1 has no cap)."""
    if limit and _current[0] == "aiohttp":
        async with create_session(connect_timeout=2.0, limit=limit) as session:
            yield SessionTransport(session)
        return
    transport = build(NetworkSettings(trust_env=False, transport=_current[0]))
    try:
        yield transport
    finally:
        await transport.close()
