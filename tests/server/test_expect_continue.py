"""`Expect: 100-continue` on `batchgate serve`, over a raw socket (RFC 9110 §10.1.1): a body that
its route will take gets `100 Continue`, then the normal answer once it is sent; a declared body
over the route's bound gets its 413 at once — never a `100 Continue` that invites the body first —
and the key is still checked before the size (no key: a 401, as without `Expect`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import BinaryIO

import orjson
import pytest

from batchgate.server.door.body_limits import MIB

from .harness import ALPHA, Server

pytestmark = pytest.mark.integration
CHAT = "/v1/chat/completions"  # the live class: 8 MiB by default


def _head(path: str, length: int, key: str | None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json"]
    lines += [f"Content-Length: {length}", "Expect: 100-continue", "Connection: close"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(stream: BinaryIO) -> tuple[int, bytes]:
    """One response from `stream`: its status and its body (by Content-Length; none for a 1xx)."""
    status = int(stream.readline().split(b" ", 2)[1])
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, stream.read(length)


@pytest.fixture
def connection(server: Server) -> Iterator[tuple[socket.socket, BinaryIO]]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s, s.makefile("rb") as stream:
        yield s, stream


def test_a_body_over_the_bound_gets_its_413_without_a_100_continue(
    connection: tuple[socket.socket, BinaryIO], keys: dict[str, str]
) -> None:
    s, stream = connection
    s.sendall(_head(CHAT, 9 * MIB, keys["a"]))  # and not a byte of the body
    status, body = _answer(stream)
    assert status == 413, body
    assert "--max-body live=SIZE" in orjson.loads(body)["error"]["message"]


def test_a_body_over_the_bound_without_a_key_is_a_401_without_a_100_continue(
    connection: tuple[socket.socket, BinaryIO],
) -> None:
    s, stream = connection
    s.sendall(_head(CHAT, 9 * MIB, None))
    status, body = _answer(stream)
    assert status == 401, body


def test_a_body_within_the_bound_gets_a_100_continue_then_its_answer(
    connection: tuple[socket.socket, BinaryIO], keys: dict[str, str]
) -> None:
    s, stream = connection
    body = orjson.dumps({"model": ALPHA, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    s.sendall(_head(CHAT, len(body), keys["a"]))
    assert _answer(stream) == (100, b"")
    s.sendall(body)
    status, answer = _answer(stream)
    assert status == 200, answer
    assert orjson.loads(answer)["choices"][0]["message"]["content"]
