"""`batchgate.providers.h1.parser`: one HTTP/1.x response from its bytes, however they are split."""

from __future__ import annotations

import gzip
import zlib

import pytest

from batchgate.providers.h1 import parser as parser_module
from batchgate.providers.h1.errors import H1BodyBroken, H1GarbledHead, H1ProtocolError, H1TooLarge
from batchgate.providers.h1.parser import MAX_HEAD, Response, ResponseParser

OK = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Ratelimit-Remaining-Requests: 7\r\n"
    b'Content-Length: 11\r\n\r\n{"ok":true}'
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nx-request-id: r1\r\n\r\n"
    b'4;name=value\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\nTrailer-Field: x\r\n\r\n'
)


def _feed_all(data: bytes, step: int | None = None) -> tuple[ResponseParser, Response]:
    parser = ResponseParser()
    done = False
    if step is None:
        done = parser.feed(data)
    else:
        for i in range(0, len(data), step):
            assert not done, "complete before its last byte"
            done = parser.feed(data[i : i + step])
    assert done
    return parser, parser.response()


def test_a_length_body_in_one_piece() -> None:
    parser, (status, headers, body) = _feed_all(OK)
    assert (status, body) == (200, b'{"ok":true}')
    assert headers["x-ratelimit-remaining-requests"] == "7"  # case-insensitive, as aiohttp's
    assert parser.keep_alive


@pytest.mark.parametrize("raw", [OK, CHUNKED], ids=["length", "chunked"])
def test_every_split_of_the_bytes_reads_the_same_response(raw: bytes) -> None:
    whole = _feed_all(raw)[1]
    for step in (1, 2, 3, 7, 64):
        assert _feed_all(raw, step)[1] == whole


def test_chunks_are_joined_with_extensions_and_trailers_skipped() -> None:
    parser, (status, headers, body) = _feed_all(CHUNKED)
    assert (status, body, headers["X-Request-Id"]) == (200, b'{"a": 1}', "r1")
    assert parser.keep_alive


def test_an_interim_answer_is_skipped() -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nhi"
    assert _feed_all(raw)[1][0::2] == (201, b"hi")


def test_no_body_on_204_and_the_connection_stays_usable() -> None:
    parser, (status, _, body) = _feed_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n")
    assert (status, body, parser.keep_alive) == (204, b"", True)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n",
    ],
    ids=["connection-close", "http-1.0"],
)
def test_a_connection_the_server_will_close_is_not_kept(head: bytes) -> None:
    parser, (_, _, body) = _feed_all(head + b"ok")
    assert body == b"ok"
    assert not parser.keep_alive


def test_a_body_without_length_runs_to_the_end_of_the_connection() -> None:
    parser = ResponseParser()
    assert not parser.feed(b"HTTP/1.1 200 OK\r\n\r\npart one, ")
    assert not parser.feed(b"part two")
    assert parser.at_eof()
    assert parser.response()[2] == b"part one, part two"
    assert not parser.keep_alive


@pytest.mark.parametrize("raw", [OK, CHUNKED], ids=["length", "chunked"])
def test_the_end_of_the_connection_mid_body_is_a_broken_body(raw: bytes) -> None:
    parser = ResponseParser()
    assert not parser.feed(raw[:-3])
    with pytest.raises(H1BodyBroken):
        parser.at_eof()


def test_bytes_past_the_response_make_the_connection_unusable() -> None:
    parser = ResponseParser()
    assert parser.feed(OK + b"HTTP/1.1 200 OK\r\n")
    assert not parser.keep_alive


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded: value\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nName : value\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd",
    ],
)
def test_a_garbled_answer_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(H1ProtocolError):
        ResponseParser().feed(raw)


def test_a_head_past_its_bound_is_refused_before_it_ends() -> None:
    parser = ResponseParser()
    with pytest.raises(H1ProtocolError, match="too large"):
        parser.feed(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (MAX_HEAD + 1))


@pytest.mark.parametrize(
    ("coding", "packed"),
    [
        ("gzip", gzip.compress(b'{"x": 1}')),
        ("deflate", zlib.compress(b'{"x": 1}')),
        ("deflate", zlib.compress(b'{"x": 1}')[2:-4]),  # raw deflate, as some servers send it
    ],
)
def test_gzip_and_deflate_bodies_are_decompressed(coding: str, packed: bytes) -> None:
    head = f"HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nContent-Length: {len(packed)}\r\n\r\n"
    assert _feed_all(head.encode() + packed)[1][2] == b'{"x": 1}'


def test_a_coding_not_asked_for_is_a_protocol_error() -> None:
    parser = ResponseParser()
    assert parser.feed(b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\nxx")
    with pytest.raises(H1ProtocolError, match="coding"):
        parser.response()


def _bomb(coding: str, size: int) -> bytes:
    if coding == "gzip":
        return gzip.compress(b"\0" * size, 9)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15 if coding == "raw-deflate" else 15)
    return packer.compress(b"\0" * size) + packer.flush()


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
def test_a_decompression_bomb_stops_at_the_body_bound(coding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: the bound holds after decompression (here 1 MiB; 4 MiB of zeros packed in 4 KiB)."""
    monkeypatch.setattr(parser_module, "MAX_BODY", 1 << 20)
    packed = _bomb(coding, 4 << 20)
    assert len(packed) < 8 << 10
    name = "deflate" if coding == "raw-deflate" else coding
    head = f"HTTP/1.1 200 OK\r\nContent-Encoding: {name}\r\nContent-Length: {len(packed)}\r\n\r\n"
    parser = ResponseParser()
    assert parser.feed(head.encode() + packed)
    with pytest.raises(H1TooLarge, match="decompresses past the bound"):
        parser.response()


def test_a_body_just_at_the_bound_decompresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parser_module, "MAX_BODY", 1 << 20)
    packed = _bomb("gzip", 1 << 20)
    head = f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(packed)}\r\n\r\n"
    _, (_, _, body) = _feed_all(head.encode() + packed)
    assert body == b"\0" * (1 << 20)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (MAX_HEAD + 1), H1TooLarge),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n", H1TooLarge),
        (b"HTTX/1.1 200 OK\r\n\r\n", H1GarbledHead),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", H1GarbledHead),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", H1GarbledHead),
    ],
)
def test_what_no_retry_can_read_has_its_own_type(data: bytes, kind: type[H1ProtocolError]) -> None:
    with pytest.raises(kind):
        ResponseParser().feed(data)
