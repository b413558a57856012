"""The tracer the request path calls through `batchgate.trace_hooks`: OpenTelemetry spans.

A request's span starts when the scheduler takes the request (its parent: the current context —
a job's span, or the `traceparent` a `serve` client sent) and its `traceparent` is set for the
provider call (`trace_hooks.TRACEPARENT`). Its attempts are known only as they end, on the
`Result`: when it ends, a request of one attempt keeps that attempt's figures on its own span; one
of several gets a child span per attempt, timed as it was sent and answered, with its status and
the error that made it retry (fewer spans: the exporter's encoding is most of tracing's cost).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from contextvars import Token
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from batchgate.clock import Clock
from batchgate.endpoints import endpoint_of
from batchgate.jobs.pricing import PriceTable
from batchgate.models import Attempt, ChatBody, Result
from batchgate.trace_hooks import TRACEPARENT

T = TypeVar("T")

_BATCH_STARTS = frozenset({"batch_submitted", "batch_resumed"})


def traceparent(span: Span) -> str:
    """The W3C `traceparent` naming `span` as the parent."""
    c = span.get_span_context()
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


class OtelTracer:
    """Spans of requests, jobs and provider batches on one OpenTelemetry tracer."""

    def __init__(self, tracer: trace.Tracer, prices: PriceTable | None = None) -> None:
        self.tracer = tracer
        self._prices = prices
        self._batches: dict[tuple[str, str], Span] = {}

    def request(self, clock: Clock, body: ChatBody, custom_id: str | None, urgent: bool) -> RequestSpan:
        model = body.get("model")
        operation = endpoint_of(body)
        span = self.tracer.start_span(f"{operation} {model}")
        token = TRACEPARENT.set(traceparent(span))
        return RequestSpan(self, span, token, clock.now(), int(clock.wall() * 1e9), custom_id)

    async def job(self, job_id: str, run: Awaitable[T]) -> T:
        with self.tracer.start_as_current_span("job", attributes={"batchgate.job": job_id}):
            return await run

    def batch_event(self, name: str, fields: Mapping[str, Any]) -> None:
        key = (str(fields.get("provider")), str(fields.get("batch_id")))
        if name in _BATCH_STARTS:
            attributes: dict[str, Any] = {
                "batchgate.target": key[0],
                "batchgate.batch_id": key[1],
                "batchgate.batch_round": int(fields.get("round") or 1),
                "batchgate.batch_requests": int(fields.get("requests") or 0),
                "batchgate.batch_resumed": name == "batch_resumed",
            }
            self._batches[key] = self.tracer.start_span("provider batch", attributes=attributes)
        elif name == "batch_ended" and (span := self._batches.pop(key, None)) is not None:
            state = str(fields.get("state"))
            span.set_attribute("batchgate.batch_state", state)
            span.set_attribute("batchgate.batch_succeeded", int(fields.get("succeeded") or 0))
            span.set_attribute("batchgate.batch_failed", int(fields.get("failed") or 0))
            if state not in ("completed", "superseded"):
                span.set_status(Status(StatusCode.ERROR, state))
            span.end()

    def cost(self, result: Result) -> float | None:
        if self._prices is None or result.usage is None or self._prices.price(result.model) is None:
            return None
        return self._prices.cost(result.model, result.usage)


class RequestSpan:
    """One request's span while it runs (`trace_hooks.RequestTrace`)."""

    __slots__ = ("_owner", "_span", "_started", "_started_ns", "_token", "custom_id", "quota_wait_s")

    def __init__(
        self,
        owner: OtelTracer,
        span: Span,
        token: Token[str | None],
        now: float,
        now_ns: int,
        cid: str | None,
    ) -> None:
        self._owner, self._span, self._token = owner, span, token
        self._started, self._started_ns = now, now_ns
        self.custom_id = cid
        self.quota_wait_s = 0.0

    def quota_waited(self, seconds: float) -> None:
        self.quota_wait_s += seconds

    def end(self, result: Result, now: float) -> None:
        TRACEPARENT.reset(self._token)
        span = self._span
        if span.is_recording():
            span.set_attributes(self._attributes(result))
            attempts = result.attempts
            if len(attempts) > 1:
                for number, attempt in enumerate(attempts, 1):
                    self._attempt_span(span, number, attempt)
            if not result.ok:
                kind = result.error.kind if result.error is not None else "cancelled"
                span.set_status(Status(StatusCode.ERROR, kind))
        span.end(self._at(now))

    def _attributes(self, result: Result) -> dict[str, Any]:
        a: dict[str, Any] = {
            "batchgate.attempts": len(result.attempts),
            "batchgate.quota_wait_ms": round(self.quota_wait_s * 1000.0, 3),
        }
        if self.custom_id is not None:
            a["batchgate.custom_id"] = self.custom_id
        if result.provider is not None:
            a["batchgate.target"] = result.provider
        if result.model is not None:
            a["gen_ai.response.model"] = result.model
        if result.status_code is not None:
            a["http.response.status_code"] = result.status_code
        if result.error is not None:
            a["error.type"] = result.error.kind
        if (usage := result.usage) is not None:
            a["gen_ai.usage.input_tokens"] = usage.prompt_tokens
            a["gen_ai.usage.output_tokens"] = usage.completion_tokens
            if (cost := self._owner.cost(result)) is not None:
                a["batchgate.cost_usd"] = cost
        return a

    def _attempt_span(self, parent: Span, number: int, attempt: Attempt) -> None:
        attributes: dict[str, Any] = {
            "batchgate.attempt": number,
            "batchgate.target": attempt.provider,
            "batchgate.tokens_charged": attempt.tokens_charged,
        }
        if attempt.status is not None:
            attributes["http.response.status_code"] = attempt.status
        if attempt.error_kind is not None:
            attributes["error.type"] = attempt.error_kind  # the retry's cause
        context = trace.set_span_in_context(parent)
        start = self._at(attempt.started)
        child = self._owner.tracer.start_span(
            "attempt", context=context, attributes=attributes, start_time=start
        )
        if attempt.error_kind is not None:
            child.set_status(Status(StatusCode.ERROR, attempt.error_kind))
        child.end(start + int(attempt.latency_ms * 1e6))

    def _at(self, clock_time: float) -> int:
        """A time of the gateway's clock as the span's epoch nanoseconds."""
        return self._started_ns + int((clock_time - self._started) * 1e9)
