"""A real OTLP/HTTP trace receiver on loopback for the tests: an aiohttp server, in a thread of its
own, that takes `POST /v1/traces` (protobuf `ExportTraceServiceRequest`, as the SDK's exporter
sends it, gzip or not), decodes it with opentelemetry-proto and keeps every span it was sent."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from loopback import serving


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # hex, as a traceparent writes it
    span_id: str
    parent_span_id: str  # "" for a root span
    attributes: dict[str, Any]
    service: str
    error: bool


@dataclass
class Receiver:
    url: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    posts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def named(self, name: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.name == name]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind is not None else None


def _decode(receiver: Receiver, payload: bytes) -> None:
    request = ExportTraceServiceRequest()
    request.ParseFromString(payload)
    for rs in request.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                span = ReceivedSpan(
                    name=s.name,
                    trace_id=s.trace_id.hex(),
                    span_id=s.span_id.hex(),
                    parent_span_id=s.parent_span_id.hex(),
                    attributes={a.key: _value(a.value) for a in s.attributes},
                    service=str(resource.get("service.name")),
                    error=s.status.code == 2,  # STATUS_CODE_ERROR
                )
                with receiver.lock:
                    receiver.spans.append(span)


def _app(receiver: Receiver) -> web.Application:
    async def traces(request: web.Request) -> web.Response:
        payload = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            payload = gzip.decompress(payload)
        _decode(receiver, payload)
        with receiver.lock:
            receiver.posts += 1
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    return app


@contextlib.contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (a free port) while the block runs; `url` is its base URL,
    what `OTEL_EXPORTER_OTLP_ENDPOINT` takes."""
    receiver = Receiver()
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def main() -> None:
        async with serving(_app(receiver)) as url:
            receiver.url = url
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "the OTLP receiver did not start"
        yield receiver
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()
