"""The two `ChatTransport`s the provider clients' tests run over, one after the other: the lean
HTTP/1.1 client the gateway uses (`H1Transport`) and an aiohttp session (`SessionTransport`).

A module opts in with `pytestmark = pytest.mark.usefixtures("each_transport")` (and imports the
fixture); its helpers open `chat_transport()`, which is the one of the current parameter."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from batchgate.providers.h1 import H1Transport
from batchgate.providers.http import SessionTransport, create_session
from batchgate.providers.transport import ChatTransport

_current = ["h1"]


@pytest.fixture(params=["h1", "aiohttp"])
def each_transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test once over each transport."""
    _current[0] = request.param
    yield request.param
    _current[0] = "h1"


@asynccontextmanager
async def chat_transport(*, connect_timeout: float = 2.0, limit: int = 0) -> AsyncIterator[ChatTransport]:
    """The current transport, open for a block (`limit` caps the aiohttp session's connections)."""
    if _current[0] == "h1":
        h1 = H1Transport()
        try:
            yield h1
        finally:
            await h1.close()
        return
    async with create_session(connect_timeout=connect_timeout, limit=limit) as session:
        yield SessionTransport(session)
