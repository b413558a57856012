"""A request's span, made by hand: tracing's cost on the request path kept to building one record.

The SDK's `start_span` runs a sampler, reads the context three times, takes locks and checks each
attribute as it is set — about 30 µs a request for what is, here, always the same shape of
record. A request's span is instead a `ReadableSpan` built once, when the request ends, from
figures batchgate already holds (the `Result`'s attempts, the time waited for quota), handed to
the span processor the SDK's spans go to. Its ids are drawn when the request starts, so that its
`traceparent` goes to the provider (`trace_hooks.TRACEPARENT`): the trace is the current span's
(a job's, or a `serve` client's), or a new one. It is recorded when that parent is sampled, and
always as a root (the environment's `OTEL_TRACES_SAMPLER` applies to the SDK's own spans only).

A request of one attempt keeps that attempt's figures on its own span; one of several gets a child
span per attempt, timed as it was sent and answered, with its status and the error that made it
retry. What a plain success implies (one attempt, status 200) is left out: each attribute and each
span is paid for again in the exporter's encoding.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextvars import Token
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from batchgate.models import Attempt, Result
from batchgate.trace_hooks import TRACEPARENT

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_OK = Status(StatusCode.UNSET)


@dataclass(frozen=True, slots=True)
class Sink:
    """Where finished request spans go: the SDK's processor, with its resource and our scope."""

    processor: SpanProcessor
    resource: Resource
    scope: InstrumentationScope
    cost: Callable[[Result], float | None]  # an answer's price, None if unpriced


class RequestSpan:
    """One request's span while it runs (`trace_hooks.RequestTrace`)."""

    __slots__ = (
        "_context",
        "_lost",
        "_parent",
        "_started",
        "_started_ns",
        "_token",
        "custom_id",
        "name",
        "quota_wait_s",
        "sink",
    )

    def __init__(self, sink: Sink, name: str, now: float, now_ns: int, custom_id: str | None) -> None:
        self.sink, self.name, self.custom_id = sink, name, custom_id
        self._started, self._started_ns = now, now_ns
        self.quota_wait_s = 0.0
        self._lost: list[tuple[str, float, float]] = []  # hedged legs that lost the race
        parent = trace.get_current_span().get_span_context()
        if parent.is_valid:
            trace_id, flags = parent.trace_id, parent.trace_flags
            self._parent: SpanContext | None = parent
        else:
            trace_id, flags, self._parent = random.getrandbits(128) or 1, _SAMPLED, None
        span_id = random.getrandbits(64) or 1
        self._context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags)
        self._token: Token[str | None] = TRACEPARENT.set(f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}")

    def quota_waited(self, seconds: float) -> None:
        self.quota_wait_s += seconds

    def leg_lost(self, provider: str, sent: float, now: float) -> None:
        self._lost.append((provider, sent, now))

    def end(self, result: Result, now: float) -> None:
        TRACEPARENT.reset(self._token)
        if not self._context.trace_flags.sampled:
            return
        if len(result.attempts) > 1 or self._lost:
            for number, attempt in enumerate(result.attempts, 1):
                self._emit_attempt(number, attempt)
            for provider, sent, ended in self._lost:
                self._emit_lost(provider, sent, ended)
        status = _OK
        if not result.ok:
            kind = result.error.kind if result.error is not None else "cancelled"
            status = Status(StatusCode.ERROR, kind)
        attributes = self._attributes(result)
        self._emit(self.name, self._context, self._parent, attributes, status, self._started, now)

    def _attributes(self, result: Result) -> dict[str, AttributeValue]:
        a: dict[str, AttributeValue] = {"batchgate.quota_wait_ms": round(self.quota_wait_s * 1000.0, 3)}
        if len(result.attempts) != 1:
            a["batchgate.attempts"] = len(result.attempts)
        if self._lost:
            a["batchgate.hedged"] = True
        if self.custom_id is not None:
            a["batchgate.custom_id"] = self.custom_id
        if result.provider is not None:
            a["batchgate.target"] = result.provider
        if result.model is not None:
            a["gen_ai.response.model"] = result.model
        if result.error is not None:
            a["error.type"] = result.error.kind
            if result.status_code is not None:
                a["http.response.status_code"] = result.status_code
        if (usage := result.usage) is not None:
            a["gen_ai.usage.input_tokens"] = usage.prompt_tokens
            a["gen_ai.usage.output_tokens"] = usage.completion_tokens
            if (cost := self.sink.cost(result)) is not None:
                a["batchgate.cost_usd"] = cost
        return a

    def _emit_attempt(self, number: int, attempt: Attempt) -> None:
        a: dict[str, AttributeValue] = {
            "batchgate.attempt": number,
            "batchgate.target": attempt.provider,
            "batchgate.tokens_charged": attempt.tokens_charged,
        }
        if attempt.status is not None:
            a["http.response.status_code"] = attempt.status
        status = _OK
        if attempt.error_kind is not None:
            a["error.type"] = attempt.error_kind  # the retry's cause
            status = Status(StatusCode.ERROR, attempt.error_kind)
        context = SpanContext(
            self._context.trace_id, random.getrandbits(64) or 1, False, self._context.trace_flags
        )
        ended = attempt.started + attempt.latency_ms / 1000.0
        self._emit("attempt", context, self._context, a, status, attempt.started, ended)

    def _emit_lost(self, provider: str, sent: float, ended: float) -> None:
        """A hedged attempt's leg that the other leg beat: cancelled, its charge kept."""
        a: dict[str, AttributeValue] = {"batchgate.target": provider, "batchgate.lost_race": True}
        context = SpanContext(
            self._context.trace_id, random.getrandbits(64) or 1, False, self._context.trace_flags
        )
        self._emit("attempt", context, self._context, a, _OK, sent, ended)

    def _emit(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, AttributeValue],
        status: Status,
        start: float,
        end: float,
    ) -> None:
        sink = self.sink
        span = ReadableSpan(
            name,
            context,
            parent,
            sink.resource,
            attributes,
            status=status,
            start_time=self._at(start),
            end_time=self._at(end),
            instrumentation_scope=sink.scope,
        )
        sink.processor.on_end(span)

    def _at(self, clock_time: float) -> int:
        """A time of the gateway's clock as epoch nanoseconds."""
        return self._started_ns + int((clock_time - self._started) * 1e9)
