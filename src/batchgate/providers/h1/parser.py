"""One HTTP/1.x response read from the bytes of a connection (RFC 9112), pure: bytes in, a response out.

`ResponseParser.feed` takes whatever arrived and says when the response is complete; `at_eof` says
whether the connection's end completes it (a body read to the end) or breaks it. The head is
bounded (`MAX_HEAD`), so is the body (`MAX_BODY`); a 1xx interim answer is skipped; a body comes
by `Content-Length`, by chunks, or (neither given) to the end of the connection; 204 and 304 have
none. `keep_alive` says whether the connection can carry another request (HTTP/1.1 without
`Connection: close`, a body with a known end, nothing sent past it). A gzip or deflate body is
decompressed when the response is taken (`response`), with a max output length: the bound holds
after decompression, so a bomb (299 KiB of gzip inflating to 300 MiB) stops at `MAX_BODY` with
`H1TooLarge` instead of filling memory; any other coding is a protocol error (the transport asks
for those two only). A streamed answer's parser has a `sink`: its body's bytes (chunks undone) go
there as they arrive, unbounded in total and never decompressed (a stream asks for `identity`).
What no retry can change raises its own type: `H1TooLarge` (a head or body
past the bound), `H1GarbledHead` (a status or header line that is not HTTP/1.x).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from multidict import CIMultiDict, CIMultiDictProxy

from batchgate.providers.h1.errors import H1BodyBroken, H1GarbledHead, H1ProtocolError, H1TooLarge

MAX_HEAD = 64 * 1024  # a status line and headers; aiohttp's bound is 8 KiB per line
MAX_BODY = 256 * 1024 * 1024  # what one answer may hold
MAX_CHUNK_LINE = 1024
_HEX = b"0123456789abcdefABCDEF"

_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER, _TO_EOF, _DONE = range(7)
_NO_BODY = frozenset((204, 304))

Response = tuple[int, CIMultiDictProxy[str], bytes]


class ResponseParser:
    """Reads one response; see the module docstring."""

    __slots__ = (
        "_body", "_buf", "_got", "_headers", "_need", "_state", "_status", "keep_alive", "sink", "started",
    )  # fmt: skip

    def __init__(self, sink: Callable[[bytes], None] | None = None) -> None:
        self.sink = sink
        self._buf = bytearray()
        self._body = bytearray()
        self._state = _HEAD
        self._status = 0
        self._headers: CIMultiDict[str] = CIMultiDict()
        self._need = 0
        self._got = 0  # the body's bytes so far
        self.keep_alive = False
        self.started = False  # some of the answer arrived

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def head_done(self) -> bool:
        return self._state != _HEAD

    def head(self) -> tuple[int, CIMultiDictProxy[str]]:
        """The status and headers (once `head_done`)."""
        return self._status, CIMultiDictProxy(self._headers)

    def feed(self, data: bytes) -> bool:
        """Take bytes that arrived; True once the response is complete (a stream's sink is given
        the body's bytes they held, in one piece)."""
        if self.sink is None:
            return self._feed(data)
        try:
            return self._feed(data)
        finally:
            if self._body:
                self.sink(bytes(self._body))
                self._body.clear()

    def _feed(self, data: bytes) -> bool:
        if data:
            self.started = True
        if self._state == _DONE:
            if data:
                self.keep_alive = False  # bytes past the response: the connection is not ours to reuse
            return True
        buf = self._buf
        buf += data
        if self._state == _HEAD and not self._read_head():
            return False
        state = self._state
        if state == _LENGTH:
            self._read_length()
        elif state == _TO_EOF:
            self._take(buf)
            buf.clear()
        elif state != _DONE:
            self._read_chunks()
        if self._state == _DONE and buf:
            self.keep_alive = False
        return self._state == _DONE

    def at_eof(self) -> bool:
        """The connection ended: True if that completes the response (a body read to its end),
        else `H1BodyBroken` (mid-body) — never called before the answer started (the connection
        says that it dropped)."""
        if self._state == _DONE:
            return True
        if self._state == _TO_EOF:
            self._state = _DONE
            return True
        raise H1BodyBroken("the connection closed before the response ended")

    def response(self) -> Response:
        """The complete response: status, headers and the body, decompressed."""
        body = bytes(self._body)
        coding = self._headers.get("Content-Encoding", "").strip().lower()
        if coding and coding != "identity":
            body = _decompress(coding, body)
        return self._status, CIMultiDictProxy(self._headers), body

    def _read_head(self) -> bool:
        """Parse the head once it has all arrived (interim 1xx heads skipped); False: not yet."""
        buf = self._buf
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise H1TooLarge(f"the response head is too large (past {MAX_HEAD} bytes)")
                return False
            if end > MAX_HEAD:
                raise H1TooLarge(f"the response head is too large (past {MAX_HEAD} bytes)")
            lines = buf[:end].decode("latin-1").split("\r\n")
            del buf[: end + 4]
            status, version_11 = _status_line(lines[0])
            if 100 <= status < 200:
                continue  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            self._status = status
            headers = self._headers
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep or not name or name[-1] in " \t" or name[0] in " \t":
                    raise H1GarbledHead(f"a malformed header line {line[:40]!r}")
                headers.add(name, value.strip(" \t"))
            self._body_mode(status, version_11)
            return True

    def _body_mode(self, status: int, version_11: bool) -> None:
        headers = self._headers
        connection = headers.get("Connection", "").lower()
        self.keep_alive = version_11 and "close" not in connection
        if status in _NO_BODY:
            self._state = _DONE
            return
        coding = headers.get("Transfer-Encoding")
        if coding is not None:
            if coding.rsplit(",", 1)[-1].strip().lower() == "chunked":
                self._state = _CHUNK_SIZE
            else:
                self._state, self.keep_alive = _TO_EOF, False
            return
        lengths = headers.getall("Content-Length", ())
        if not lengths:
            self._state, self.keep_alive = _TO_EOF, False
            return
        if len(set(lengths)) != 1 or not lengths[0].isdigit() or not lengths[0].isascii():
            raise H1GarbledHead(f"an invalid Content-Length {lengths[0][:20]!r}")
        self._need = int(lengths[0])
        if self._need > MAX_BODY:
            raise H1TooLarge(f"a body of {self._need} bytes is past the bound ({MAX_BODY})")
        self._state = _LENGTH

    def _read_length(self) -> None:
        buf, want = self._buf, self._need - self._got
        if len(buf) <= want:
            self._take(buf)
            buf.clear()
        else:
            self._take(buf[:want])
            del buf[:want]
        if self._got == self._need:
            self._state = _DONE

    def _read_chunks(self) -> None:
        """Chunks read by position; what they used is cut from the buffer once, at the end."""
        buf, pos = self._buf, 0
        try:
            while True:
                if self._state == _CHUNK_SIZE:
                    end = buf.find(b"\r\n", pos)
                    if end < 0:
                        if len(buf) - pos > MAX_CHUNK_LINE:
                            raise H1ProtocolError("a chunk-size line is too long")
                        return
                    self._need = _chunk_size(buf[pos:end])
                    pos = end + 2
                    self._state = _CHUNK_DATA if self._need else _TRAILER
                elif self._state == _CHUNK_DATA:
                    stop = pos + self._need
                    if len(buf) < stop + 2:
                        return
                    if buf[stop : stop + 2] != b"\r\n":
                        raise H1ProtocolError("a chunk does not end with CRLF")
                    self._take(buf[pos:stop])
                    pos = stop + 2
                    self._state = _CHUNK_SIZE
                else:  # trailer fields, skipped, then the empty line
                    end = buf.find(b"\r\n", pos)
                    if end < 0:
                        if len(buf) - pos > MAX_HEAD:
                            raise H1ProtocolError("the trailer is too large")
                        return
                    blank, pos = end == pos, end + 2
                    if blank:
                        self._state = _DONE
                        return
        finally:
            del buf[:pos]

    def _take(self, data: bytearray) -> None:
        """Body bytes: kept, within the bound (a stream's: until `feed` hands them on)."""
        self._got += len(data)
        self._body += data
        if self._got > MAX_BODY and self.sink is None:
            raise H1TooLarge(f"the body is past the bound ({MAX_BODY} bytes)")


def _status_line(line: str) -> tuple[int, bool]:
    """The status code of `HTTP/1.x NNN reason`, and whether the version is 1.1."""
    if not line.startswith("HTTP/1.") or len(line) < 12 or line[8] != " ":
        raise H1GarbledHead(f"not an HTTP/1.x status line: {line[:40]!r}")
    code = line[9:12]
    if not code.isdigit() or not code.isascii() or (len(line) > 12 and line[12] != " "):
        raise H1GarbledHead(f"not an HTTP/1.x status line: {line[:40]!r}")
    return int(code), line[7] == "1"


def _chunk_size(line: bytearray) -> int:
    if 0 < len(line) <= 7 and not line.strip(_HEX):  # the usual: hex digits alone (< MAX_BODY)
        return int(line, 16)
    digits = bytes(line).split(b";", 1)[0].strip(b" \t")
    if not digits or digits.strip(_HEX):
        raise H1ProtocolError(f"an invalid chunk size {digits[:20]!r}")
    size = int(digits, 16)
    if size > MAX_BODY:
        raise H1TooLarge(f"a chunk of {size} bytes is past the bound ({MAX_BODY})")
    return size


def _decompress(coding: str, body: bytes) -> bytes:
    if coding in ("gzip", "x-gzip", "deflate"):
        try:
            return _inflate(body, 47)  # gzip or zlib, told by the header
        except zlib.error:
            if coding != "deflate":
                raise H1ProtocolError("the gzip body does not decompress") from None
        try:
            return _inflate(body, -15)  # "deflate" sent raw, as some servers do
        except zlib.error:
            raise H1ProtocolError("the deflate body does not decompress") from None
    raise H1ProtocolError(f"a content coding that was not asked for ({coding[:20]!r})")


def _inflate(body: bytes, wbits: int) -> bytes:
    """`body` decompressed, never past `MAX_BODY` (the output is cut at MAX_BODY + 1 bytes: more
    is a bomb, `H1TooLarge`); `zlib.error` if it does not decompress or ends early."""
    inflater = zlib.decompressobj(wbits=wbits)
    out = inflater.decompress(body, MAX_BODY + 1)
    if len(out) > MAX_BODY:
        raise H1TooLarge(f"the body decompresses past the bound ({MAX_BODY} bytes)")
    if not inflater.eof:
        raise zlib.error("incomplete or truncated stream")
    return out
