"""Where the request path calls tracing: hooks that do nothing until a tracer is installed.

The scheduler, the job runner, batch mode and the live proxy call these hooks; the OpenTelemetry
tracer (`batchgate.observe.tracing`, the `otel` extra) installs itself here with `install`. Off
(the default) each hook is one read of `tracer` and a test against None: no span, no
OpenTelemetry import, no allocation. `TRACEPARENT` is the W3C `traceparent` of the request being
sent, set by the tracer in the request's context; the chat transport (`providers.transport.call`)
adds it to the upstream request's headers when it is set.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Mapping
from typing import Protocol, TypeVar

from batchgate.clock import Clock
from batchgate.models import ChatBody, Result

__all__ = ["TRACEPARENT", "RequestTrace", "Tracer", "batch_event", "install", "job", "tracer"]

T = TypeVar("T")

TRACEPARENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "batchgate_traceparent", default=None
)


class RequestTrace(Protocol):
    """One request's span while it runs."""

    def quota_waited(self, seconds: float) -> None:
        """An attempt waited `seconds` for quota before it could be sent."""

    def leg_lost(self, provider: str, sent: float, now: float) -> None:
        """A leg of a hedged attempt, sent at `sent`, was cancelled at `now` because the other leg
        answered first (its `Result` keeps the winner's attempt only; the trace shows both)."""

    def end(self, result: Result, now: float) -> None:
        """The request ended (`now` on its gateway's clock): its attempts become the span's."""


class Tracer(Protocol):
    """What the request path asks of a tracer."""

    def request(self, clock: Clock, body: ChatBody, custom_id: str | None, urgent: bool) -> RequestTrace:
        """A request starts (its span's parent: the current context)."""

    def job(self, job_id: str, run: Awaitable[T]) -> Awaitable[T]:
        """`run` (a job's run) under the job's span: its requests and batches are its children."""

    def batch_event(self, name: str, fields: Mapping[str, object]) -> None:
        """A provider batch was submitted, resumed or ended (`jobs.batch` events)."""


tracer: Tracer | None = None


def install(new: Tracer | None) -> Tracer | None:
    """Make `new` the tracer (None: tracing off); returns the one it replaced."""
    global tracer
    old, tracer = tracer, new
    return old


def job(job_id: str, run: Awaitable[T]) -> Awaitable[T]:
    """`run` under the job's span when tracing is on; `run` itself otherwise."""
    return run if tracer is None else tracer.job(job_id, run)


def batch_event(name: str, fields: Mapping[str, object]) -> None:
    if tracer is not None:
        tracer.batch_event(name, fields)
