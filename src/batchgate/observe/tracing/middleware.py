"""`batchgate serve` under tracing: a client's `traceparent` (and `tracestate`) made the parent of
the spans its request starts, by an aiohttp middleware the app gets only while tracing is on (off:
no middleware at all, and no OpenTelemetry import)."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from batchgate import trace_hooks


def middlewares() -> list[Middleware]:
    """The middleware adopting a client's trace context when tracing is on; none otherwise."""
    if trace_hooks.tracer is None:
        return []
    from opentelemetry import context  # noqa: PLC0415 — optional extra `otel`: only when tracing
    from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415 — as above
        TraceContextTextMapPropagator,
    )

    propagator = TraceContextTextMapPropagator()

    @web.middleware
    async def adopt_traceparent(request: web.Request, handler: Handler) -> web.StreamResponse:
        if "traceparent" not in request.headers:
            return await handler(request)
        token = context.attach(propagator.extract(request.headers))
        try:
            return await handler(request)
        finally:
            context.detach(token)

    return [adopt_traceparent]
