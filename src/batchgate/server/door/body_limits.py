"""How large a request body each route takes, refused before it is read.

Routes fall into four classes, each with its own bound (`serve --max-body CLASS=SIZE`):

    upload   POST /v1/files: the multipart file upload (200 MiB: OpenAI's file limit), streamed to
             disk and cut off at the bound (`files.Files`)
    batch    POST /v1/jobs and POST /v1/messages/batches: requests inline (64 MiB)
    live     POST /v1/chat/completions, /v1/embeddings, /v1/responses, /v1/completions and
             /v1/messages: one live request (8 MiB)
    other    every other route (1 MiB, aiohttp's own default)

A declared `Content-Length` over the bound is a 413 before a byte of the body is read; a chunked
body is read at most to the bound (`read`, through which every JSON body is read; an upload is
streamed to disk and cut off by `files.Files`) and then refused the same way, so the server holds
at most one bound per request, never the whole body
(shared/PROTOCOLS.md, "Untrusted values inside the server"). The 413 names the bound and the
option that sets it. A client that sends `Expect: 100-continue` gets `100 Continue` only for a body
its route will take (`expecting`); over the bound it gets its answer at once, before sending it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, fields

from aiohttp import HttpVersion11, hdrs, web
from aiohttp.typedefs import Handler, Middleware

from batchgate.errors import ServiceRequestError

MIB = 1024 * 1024
UPLOAD_OVERHEAD = 64 * 1024  # the multipart form's own bytes around the file (headers, `purpose`)
CLASSES = ("upload", "batch", "live", "other")
BOUND = "batchgate.body_bound"  # the request's route class and the limits, for `read`
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": MIB, "g": 1024 * MIB}
_LIVE = ("/v1/chat/completions", "/v1/messages", "/v1/embeddings", "/v1/responses", "/v1/completions")
_BATCH = ("/v1/jobs", "/v1/messages/batches")


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """The largest body, in bytes, of each class of route (see the module docstring)."""

    upload: int = 200 * MIB
    batch: int = 64 * MIB
    live: int = 8 * MIB
    other: int = 1 * MIB

    def route_class(self, method: str, path: str) -> str:
        path = path.rstrip("/")
        if method != "POST":
            return "other"
        if path == "/v1/files":
            return "upload"
        if path in _BATCH:
            return "batch"
        return "live" if path in _LIVE else "other"

    def bound(self, route_class: str) -> int:
        """The body bound of a route class (an upload's adds the form's own bytes to the file's)."""
        value: int = getattr(self, route_class)
        return value + UPLOAD_OVERHEAD if route_class == "upload" else value

    @property
    def largest(self) -> int:
        return max(self.bound(name) for name in CLASSES)


DEFAULT = BodyLimits()


def parse_size(text: str) -> int:
    """`8388608`, `8M`, `8MiB`, `512k`, `1G` (binary units) -> bytes; ValueError if not a size."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(text)
    unit = (match.group(2) or "").lower().rstrip("b").rstrip("i")
    return int(match.group(1)) * _UNITS[unit]


def parse_limits(entries: list[str], base: BodyLimits | None = None) -> BodyLimits:
    """`CLASS=SIZE` entries (`live=4M`, `upload=500M`) over the defaults; ValueError naming the
    entry when one is not a known class with a positive size."""
    values = {f.name: getattr(base or BodyLimits(), f.name) for f in fields(BodyLimits)}
    for entry in entries:
        name, _, size = entry.partition("=")
        name = name.strip().lower()
        try:
            value = parse_size(size)
        except ValueError:
            value = 0
        if name not in values or value < 1:
            raise ValueError(
                f"--max-body {entry!r}: expected CLASS=SIZE with CLASS one of {', '.join(CLASSES)}"
                " and a positive SIZE (bytes, or with K, M or G)"
            )
        values[name] = value
    return BodyLimits(**values)


def shown(size: int) -> str:
    """A size as the 413 says it: `8 MiB (8388608 bytes)`."""
    if size % MIB == 0:
        return f"{size // MIB} MiB ({size} bytes)"
    return f"{size} bytes"


def too_large(route_class: str, limits: BodyLimits) -> ServiceRequestError:
    limit = getattr(limits, route_class)
    return ServiceRequestError(
        413,
        f"The request body is larger than this route's limit of {shown(limit)}"
        f" (the server's --max-body {route_class}=SIZE sets it).",
        code="request_too_large",
    )


async def read(request: web.Request) -> bytes:
    """The whole body, read a chunk at a time and refused (413) once past its route's bound: unlike
    `request.read()`, which decompresses a gzip body in chunks as large as the bound, a small
    compressed body that inflates hugely costs no more than the bound. A body that has all arrived
    before the route reads it (a live request's, as a rule: in the packet of its headers) is taken
    from aiohttp's buffer at once, with no await; that buffer holds no more than aiohttp's flow
    control lets in, and the bound still applies."""
    route_class, limits = request.get(BOUND, ("other", DEFAULT))
    bound = limits.bound(route_class)
    content = request.content
    if content.is_eof():
        whole = content.read_nowait()
        if len(whole) > bound:
            raise too_large(route_class, limits)
        return whole
    body = bytearray()
    async for chunk in request.content.iter_any():
        if len(body) + len(chunk) > bound:
            raise too_large(route_class, limits)
        body += chunk
    return bytes(body)


def middleware(limits: BodyLimits) -> Middleware:
    """Refuses a declared body over its route's bound before reading it, and tells `read` the
    bound of an undeclared (chunked) one. The request is not cloned with its own
    `client_max_size` (tens of microseconds a request on the live path): no route calls
    `request.read()` (`tests/server/test_body_limits.py` holds it), and the app's `client_max_size`
    (the largest bound) would still cap one."""

    @web.middleware
    async def bounded(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.body_exists:
            return await handler(request)
        route_class = limits.route_class(request.method, request.path)
        bound = limits.bound(route_class)
        declared = request.content_length
        if declared is not None and declared > bound:
            raise too_large(route_class, limits)
        request[BOUND] = (route_class, limits)
        try:
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            raise too_large(route_class, limits) from None

    return bounded


def expecting(routes: Iterable[web.RouteDef], limits: BodyLimits) -> list[web.RouteDef]:
    """`routes`, each answering `Expect: 100-continue` by its bound. aiohttp answers `Expect` per
    route and before any middleware: its default sends `100 Continue` whatever the size, inviting a
    body that `middleware` then refuses. Here a declared body over the bound gets no 100, and the
    middlewares answer as without `Expect` (the key checked first, then the 413), the body unsent."""

    async def expect(request: web.Request) -> None:
        declared = request.content_length
        if declared is not None and declared > limits.bound(limits.route_class(request.method, request.path)):
            return
        if request.version != HttpVersion11:
            return
        if request.headers.get(hdrs.EXPECT, "").lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {request.headers[hdrs.EXPECT]}")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # as aiohttp's own: the answer's size starts after the 100

    return [web.RouteDef(r.method, r.path, r.handler, {**r.kwargs, "expect_handler": expect}) for r in routes]
