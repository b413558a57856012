"""One streamed request's life (`Gateway.stream_chat`, the live proxy's `stream: true`): the
scheduler's route, quota and retries, then the provider's events handed on as they arrive.

As an attempt of `batchgate.scheduler` it picks a target, reserves the estimated cost (prompt +
`max_tokens`), passes the key's shared quota, takes an in-flight place and a slot, and sends —
here with `stream: true` (`providers.stream_call`). A failure before the provider's first event
(a 429, a 5xx, a refused connection, a stream that ends or stalls before its first event) goes
to the scheduler's retry policy and failover as any attempt's does; once the first event is
handed on there is no other attempt — the client has bytes of this answer.

The reservation is held (at `max_tokens`) until the stream ends and settled exactly once
(`quota.held.Held`): from the provider's final usage when the stream completes; from what was
produced (the prompt as the provider said or as reserved, a token an event of text) when the
consumer stops early (a client that disconnected: the upstream call is closed, so the provider
stops) or the stream breaks or stalls (`timeouts.stream_idle` without an event: a
`RequestTimeout` raised to the consumer after the events it had).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from batchgate.admission import Candidate
from batchgate.attempt import CALIBRATE_ALWAYS, CALIBRATE_EVERY
from batchgate.clock import Clock
from batchgate.config import TimeoutConfig
from batchgate.endpoints import request_problem
from batchgate.errors import (
    BadRequestError,
    BatchgateError,
    InvalidRequestError,
    MalformedResponse,
    ProviderError,
    RateLimitError,
    RoutingError,
    TLSError,
    UnreachableError,
)
from batchgate.models import ChatBody, Usage
from batchgate.policy.circuit import counts_as_failure
from batchgate.policy.hints import parse_retry_hint
from batchgate.policy.takeout import allowed
from batchgate.providers.classify import error_fields
from batchgate.providers.h1 import H1Transport
from batchgate.providers.stream_call import UpstreamStream, open_stream
from batchgate.quota.held import Held
from batchgate.quota.limits import UNSENT, Outcome
from batchgate.runtime import ProviderRuntime
from batchgate.scheduler import Scheduler

if TYPE_CHECKING:
    from batchgate.providers.stream_events import Format, StreamEvent


class Upstreams:
    """Opens streamed calls to providers over each provider client's lean HTTP/1.1 transport (the
    connections its calls that are not streamed use: pooled, its network's proxy and TLS)."""

    def __init__(self, timeouts: TimeoutConfig) -> None:
        self.timeouts = timeouts

    async def open(
        self, rt: ProviderRuntime, body: ChatBody, model: str, relay: Format | None = None
    ) -> UpstreamStream:
        transport = getattr(rt.client, "_transport", None)
        if not isinstance(transport, H1Transport):
            message = (  # `transport: aiohttp`: its answers are read whole
                f"{rt.name}: streamed calls need transport: h1 (this provider's transport does not"
                " stream; send the request without stream: true)"
            )
            raise BadRequestError(message, provider=rt.name)
        t = self.timeouts
        return await open_stream(
            transport, rt.client, dict(body), model, connect=t.connect, idle=t.stream_idle, relay=relay
        )

    async def close(self) -> None:
        """Nothing to close: the transports are the gateway's."""


class _Attempt:
    """One streamed attempt at one target: its reservation, places and upstream call."""

    def __init__(
        self, sched: Scheduler, candidate: Candidate, held: Held, body: ChatBody, urgent: bool
    ) -> None:
        self.sched, self.held, self.body, self.urgent = sched, held, body, urgent
        self.relay: Format | None = None
        self.target, _, _, self.count = candidate
        self.rt: ProviderRuntime = self.target.runtime
        self.upstream: UpstreamStream | None = None
        self.placed = False
        self.prompt: int | None = None  # the prompt tokens the provider said (Messages: at the start)
        self.pieces = 0  # events of text handed on
        self.sent = 0.0

    @property
    def clock(self) -> Clock:
        return self.sched._clock

    async def open(self, upstreams: Upstreams) -> StreamEvent:
        """Send, and wait for the first event (a `ProviderError` settles this attempt first)."""
        rt, slots = self.rt, self.sched._attempts._global
        if not rt.slots.try_acquire(urgent=self.urgent):
            await rt.slots.acquire(urgent=self.urgent)
        try:
            if not slots.try_acquire(rt.name, urgent=self.urgent):
                await slots.acquire(rt.name, urgent=self.urgent)
        except BaseException:
            rt.slots.release()
            raise
        self.placed = True
        self.held.on_wire()
        self.sent = self.clock.now()
        rt.recorder.requests += 1
        try:
            self.upstream = await upstreams.open(rt, self.body, self.target.model, self.relay)
            first = await self.upstream.next()
            if first is None:
                raise MalformedResponse(
                    f"{rt.name}: the stream ended before its first event", provider=rt.name
                )
        except ProviderError as exc:
            self.failed(exc)
            raise
        return first

    def failed(self, exc: ProviderError) -> None:
        """Settle and record an attempt that failed before its first event."""
        rt, now = self.rt, self.clock.now()
        if isinstance(exc, RateLimitError):
            wall = self.clock.wall()
            snapshot = rt.client.rate_limits(exc.headers, wall)
            hint = parse_retry_hint(exc.headers, wall, max_hint=self.sched._retry.settings.max_hint)
            self.held.settle(Outcome.refused(self.count, snapshot, hint, error_fields(exc.body)[0]))
        elif isinstance(exc, UnreachableError | TLSError):
            self.held.settle(UNSENT)
        self.held.close()  # anything else: sent, cost unknown
        if counts_as_failure(exc):
            rt.breaker.record_failure(now)
        rt.recorder.record_failure(exc.kind, (now - self.sent) * 1000.0, 0)
        self.release()

    def seen(self, ev: StreamEvent) -> None:
        self.pieces += ev.pieces
        if ev.fmt == "messages" and ev.start:
            usage = (ev.data.get("message") or {}).get("usage") or {}
            prompt = usage.get("input_tokens")
            self.prompt = prompt if type(prompt) is int else None

    def ended(self, usage: Usage | None) -> None:
        """The stream completed: settled from its usage (what was produced when it gave none)."""
        rt, now = self.rt, self.clock.now()
        if usage is None:
            self.partial()
            return
        assert self.upstream is not None
        succeeded = rt.recorder.succeeded  # its headers read as `attempt` reads an answer's
        read = succeeded < CALIBRATE_ALWAYS or succeeded % CALIBRATE_EVERY == 0
        snapshot = rt.client.rate_limits(self.upstream.headers, self.clock.wall()) if read else None
        self.held.settle(Outcome.answered(usage, self.count, snapshot))
        rt.counter.observe(self.body, usage.prompt_tokens)
        rt.breaker.record_success(now)
        latency = (now - self.sent) * 1000.0
        rt.recorder.record_success(latency, usage.prompt_tokens, usage.completion_tokens)

    def partial(self) -> None:
        """Settle with what was produced (no count: the charge model learns nothing from it),
        unless it was settled."""
        if self.held.reservation.settled:
            return
        cost = self.held.reservation.cost
        prompt = self.prompt if self.prompt is not None else cost.tokens - cost.output_tokens
        self.held.settle(Outcome("answered", usage=Usage(prompt, self.pieces)))

    def release(self) -> None:
        if self.upstream is not None:
            self.upstream.close()
        if self.placed:
            self.placed = False
            self.sched._attempts._global.release(self.rt.name)
            self.rt.slots.release()
        self.held.close()


async def events(
    sched: Scheduler,
    upstreams: Upstreams,
    body: ChatBody,
    *,
    urgent: bool = False,
    task: str | None = None,
    relay: Format | None = None,
) -> AsyncGenerator[StreamEvent, None]:
    """The provider's events for `body`, as they arrive (see the module docstring); `relay`: the
    format the caller passes on as it is (such events come with `.text` empty: only counted)."""
    try:
        first, attempt = await _first(sched, upstreams, body, urgent, task, relay)
    except BatchgateError:
        sched.items_failed += 1
        raise
    usage: Usage | None = None
    try:
        ev: StreamEvent | None = first
        while ev is not None:
            attempt.seen(ev)
            usage = ev.usage or usage
            yield ev
            assert attempt.upstream is not None
            if ev.done:  # read to its end: the connection goes back to the pool
                with contextlib.suppress(ProviderError):
                    while await attempt.upstream.next() is not None:
                        pass
                break
            ev = await attempt.upstream.next()
        attempt.ended(usage)
        sched.items_succeeded += 1
    finally:
        attempt.partial()  # (nothing once `ended` settled it: settled once)
        attempt.release()


async def _first(
    sched: Scheduler,
    upstreams: Upstreams,
    body: ChatBody,
    urgent: bool,
    task: str | None,
    relay: Format | None,
) -> tuple[StreamEvent, _Attempt]:
    """The first event of the first attempt that gets one, through the scheduler's retries."""
    model = body.get("model")
    if not isinstance(model, str):
        raise RoutingError("the request has no model")
    if (problem := request_problem(body)) is not None:
        raise InvalidRequestError(problem)
    candidates = allowed(sched._fitting(sched.targets_for(model), body), sched._refusal, model)
    spent = 0
    while True:
        chosen, reservation, probe = await sched._acquire_any(candidates, model, urgent)
        rt = chosen[0].runtime
        attempt = _Attempt(sched, chosen, Held(rt.pool, reservation), body, urgent)
        attempt.relay = relay
        try:
            if rt.pool.shared is not None:
                await sched._admit.take_shared(rt.pool, reservation, urgent)
            first = await attempt.open(upstreams)
        except ProviderError as exc:
            error, spent = exc, spent + 1
            try:
                candidates, delay = sched._after_failure(
                    chosen[0], error, spent, candidates, model, task, probe
                )
            finally:
                sched._after_attempt(rt, probe, task)
        except BaseException:
            attempt.release()
            sched._after_attempt(rt, probe, task)
            raise
        else:
            sched._after_attempt(rt, probe, task)
            return first, attempt
        if delay < 0:
            spent, delay = spent - 1, 0.0
        rt.recorder.record_retry(error.kind)
        if delay > 0:
            await sched._back_off(delay)
