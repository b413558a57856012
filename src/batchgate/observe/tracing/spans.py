"""The tracer the request path calls through `batchgate.trace_hooks`: OpenTelemetry spans.

A request's span (`request_span`: made by hand, for its cost) starts when the scheduler takes the
request; a job's span is the current span while its run lasts, so its requests and batches are
its children; a provider batch's span lasts from its submission (or its resumption by a later
run) to its end, with its state and counts. Costs come from the config's price table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import SupportsIndex, SupportsInt, TypeVar

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from batchgate.clock import Clock
from batchgate.endpoints import endpoint_of
from batchgate.jobs.pricing import PriceTable
from batchgate.models import ChatBody, Result
from batchgate.observe.tracing.request_span import RequestSpan, Sink

T = TypeVar("T")

SCOPE = "batchgate"  # the instrumentation scope of every span
_BATCH_STARTS = frozenset({"batch_submitted", "batch_resumed"})


class OtelTracer:
    """Spans of requests, jobs and provider batches on one OpenTelemetry tracer."""

    def __init__(
        self,
        tracer: trace.Tracer,
        processor: SpanProcessor,
        resource: Resource,
        prices: PriceTable | None = None,
    ) -> None:
        self.tracer = tracer
        self.unexported = 0  # spans the exporter gave up on (known once tracing is closed)
        self._sink = Sink(processor, resource, InstrumentationScope(SCOPE), self.cost)
        self._prices = prices
        self._priced: dict[str, PriceTable | None] = {}  # per answering model: its price alone
        self._batches: dict[tuple[str, str], Span] = {}

    def request(self, clock: Clock, body: ChatBody, custom_id: str | None, urgent: bool) -> RequestSpan:
        model = body.get("model")
        operation = endpoint_of(body)
        now_ns = int(clock.wall() * 1e9)
        return RequestSpan(self._sink, f"{operation} {model}", clock.now(), now_ns, custom_id)

    async def job(self, job_id: str, run: Awaitable[T]) -> T:
        with self.tracer.start_as_current_span("job", attributes={"batchgate.job": job_id}):
            return await run

    def batch_event(self, name: str, fields: Mapping[str, object]) -> None:
        key = (str(fields.get("provider")), str(fields.get("batch_id")))
        if name in _BATCH_STARTS:
            attributes: dict[str, AttributeValue] = {
                "batchgate.target": key[0],
                "batchgate.batch_id": key[1],
                "batchgate.batch_round": _count(fields.get("round"), 1),
                "batchgate.batch_requests": _count(fields.get("requests"), 0),
                "batchgate.batch_resumed": name == "batch_resumed",
            }
            self._batches[key] = self.tracer.start_span("provider batch", attributes=attributes)
        elif name == "batch_ended" and (span := self._batches.pop(key, None)) is not None:
            state = str(fields.get("state"))
            span.set_attribute("batchgate.batch_state", state)
            span.set_attribute("batchgate.batch_succeeded", _count(fields.get("succeeded"), 0))
            span.set_attribute("batchgate.batch_failed", _count(fields.get("failed"), 0))
            if state not in ("completed", "superseded"):
                span.set_status(Status(StatusCode.ERROR, state))
            span.end()

    def cost(self, result: Result) -> float | None:
        """What the answer cost by the config's prices (None: unpriced); the price table's
        longest-prefix lookup is made once per model."""
        model, usage = result.model, result.usage
        if self._prices is None or usage is None or model is None:
            return None
        if model not in self._priced:
            price = self._prices.price(model)
            self._priced[model] = None if price is None else PriceTable({model: price}, builtin=False)
        table = self._priced[model]
        return None if table is None else table.cost(model, usage)


def _count(value: object, default: int) -> int:
    """An event's count (`int(value or default)`): the batch driver's fields are numbers."""
    if not value:
        return default
    if isinstance(value, str | bytes | SupportsInt | SupportsIndex):
        return int(value)
    raise TypeError(f"a count must be a number, got {type(value).__name__}")
