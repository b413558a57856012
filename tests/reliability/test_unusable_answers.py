"""Answers no retry can read, from a raw loopback server (issue 38): a head past the client's
64 KiB bound, a status line that is not HTTP, a 299 KiB gzip that inflates to 300 MiB. Each
ends with its own error kind (never a JSON error after inflating past the bound), the request
is tried at most twice for it (not `max_attempts` times, each answer paid for), and the run's
figures count the retries it spent per cause. The aiohttp session of the Batch API calls keeps
the same bound after decompression."""

from __future__ import annotations

import asyncio
import functools
import gzip
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest

from batchgate.config import TimeoutConfig, config_from_dict
from batchgate.errors import AnswerTooLarge
from batchgate.gateway import Gateway
from batchgate.providers.h1.parser import MAX_BODY, MAX_HEAD
from batchgate.providers.http import create_session, request_timeout, send

pytestmark = pytest.mark.integration

BOMB_SIZE = 300 * 1024 * 1024  # inflated: past the 256 MiB bound


@functools.cache
def gzip_bomb() -> bytes:
    """300 MiB of zeros, gzipped (about 299 KiB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1 << 20)
    parts = [packer.compress(zeros) for _ in range(BOMB_SIZE >> 20)]
    return b"".join(parts) + packer.flush()


def completion() -> bytes:
    return orjson.dumps(
        {
            "id": "c",
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
    )


def answer(body: bytes, *, head: str = "HTTP/1.1 200 OK", extra: str = "", coding: str = "") -> bytes:
    headers = f"{head}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}"
    if coding:
        headers += f"Content-Encoding: {coding}\r\n"
    return headers.encode("latin-1") + b"\r\n" + body


@asynccontextmanager
async def raw_server(reply: Callable[[], bytes]) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback HTTP/1.1 server answering every request with `reply()`'s bytes; yields its base
    URL and a one-item list counting the requests it read."""
    seen = [0]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                seen[0] += 1
                writer.write(reply())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.close()
        await server.wait_closed()


async def run_one(base_url: str) -> tuple[Any, Any]:
    cfg = config_from_dict(
        {
            "providers": [{"name": "p", "kind": "openai", "base_url": base_url, "limits": {"rpm": 6000}}],
            "routes": [{"model": "m", "targets": ["p"]}],
            "settings": {"seed": 1, "retry": {"max_attempts": 8, "base_delay": 0.01, "max_delay": 0.02}},
        },
        environ={},
    )
    body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    async with Gateway(cfg) as gw:
        result = await asyncio.wait_for(gw.arun(body), 60)
        return result, gw.statistics().providers["p"]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (lambda: answer(completion(), extra=f"X-Big: {'a' * (MAX_HEAD + 10)}\r\n"), "too_large"),
        (lambda: answer(completion(), head="HTTP/1.1 20O OK"), "garbled_head"),
        (lambda: b"SPDY/9 200 OK\r\n\r\n", "garbled_head"),
    ],
    ids=["head-64KiB", "status-line", "not-http"],
)
async def test_an_answer_no_retry_can_read_is_tried_twice_and_counted_by_cause(
    reply: Callable[[], bytes], kind: str
) -> None:
    async with raw_server(reply) as (url, seen):
        result, stats = await run_one(url)
    assert not result.ok
    assert result.error.kind == kind, result.error
    assert [a.error_kind for a in result.attempts] == [kind, kind]
    assert seen[0] == 2  # two billable answers, not max_attempts (8)
    assert stats.retries_by_kind == {kind: 1}


@pytest.mark.slow  # inflates 256 MiB twice
async def test_a_gzip_bomb_stops_at_the_body_bound_on_the_chat_path() -> None:
    bomb = gzip_bomb()
    assert len(bomb) < 300 * 1024
    async with raw_server(lambda: answer(bomb, coding="gzip")) as (url, seen):
        result, stats = await run_one(url)
    assert not result.ok
    assert result.error.kind == "too_large", result.error
    assert "past the bound" in result.error.message
    assert seen[0] == 2
    assert stats.retries_by_kind == {"too_large": 1}


@asynccontextmanager
async def batch_session(reply: Callable[[], bytes]) -> AsyncIterator[Callable[[str], Any]]:
    """The Batch API's aiohttp session against a raw server: yields `get(path)` (`send`)."""
    async with raw_server(reply) as (url, _), create_session(connect_timeout=2.0) as session:
        timeout = request_timeout(TimeoutConfig())
        yield lambda path: send(session, "GET", url + path, None, {}, timeout, provider="p", api_key=None)


@pytest.mark.slow  # inflates 256 MiB
async def test_a_gzip_bomb_stops_at_the_body_bound_in_the_batch_api_session() -> None:
    bomb = gzip_bomb()
    async with batch_session(lambda: answer(bomb, coding="gzip")) as get:
        with pytest.raises(AnswerTooLarge, match="past the bound"):
            await get("/files/f/content")


async def test_the_batch_api_session_still_reads_a_gzip_answer_within_the_bound() -> None:
    packed = gzip.compress(completion())
    async with batch_session(lambda: answer(packed, coding="gzip")) as get:
        status, _, body = await get("/x")
    assert (status, body) == (200, completion())
    assert len(body) < MAX_BODY
