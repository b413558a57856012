"""One attempt of one request at one target, once quota is reserved: the wire and what it teaches.

The call runs under the provider's learned in-flight limit and the global fair slots, with the
provider's adaptive timeout; a straggler is hedged (`batchgate.racing`: sent again with quota
reserved at the head of the pool's queue, first answer wins, the loser cancelled and its charge
counted as duplicate spend) — but only with quota nobody queues for: while requests wait at the
pool, a hedge would take the place of one of them, and the adaptive timeout ends a hang at no cost
to the job, so the hedge waits until the queue drains (the job's tail; a live request's hedge does
not wait: its latency is the point). Every ending settles the reservation with one call,
`pool.settle(reservation, Outcome)`, carrying what was learned (usage and our count, the rate-limit
headers, a 429's retry hint and the limit its body names): the quota's charge model, header
calibration and AIMD sit behind it (`batchgate.quota.learning`). Besides, an answer feeds the
latency model, the in-flight limit and the breaker; a 429 the pool finds bare (no rate at fault)
teaches the in-flight limit; breaker failures by `counts_as_failure` (so a 200 with a malformed
body counts too). What changes a provider's state is logged as an event (`batchgate.logs`): a
learned in-flight cap, the circuit opening or closing, a hedge fired (and, by the quota, a limit
learned from headers, an AIMD cut, a pause from a retry hint).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from batchgate.clock import Clock
from batchgate.errors import (
    ProviderError,
    QuotaStoreUnavailable,
    RateLimitError,
    RequestTimeout,
    TLSError,
    UnreachableError,
)
from batchgate.logs import DEBUG, INFO, WARNING, enabled, event, get_logger
from batchgate.models import Attempt, ChatBody, Cost, ProviderResponse, Result
from batchgate.policy.circuit import counts_as_failure
from batchgate.policy.hints import parse_retry_hint
from batchgate.providers.classify import error_fields
from batchgate.providers.wire import sending
from batchgate.quota.held import Held
from batchgate.quota.limits import ABANDONED, SENT_UNKNOWN, UNSENT, Outcome
from batchgate.quota.pool import Reservation
from batchgate.racing import Leg, RaceTimeout, race
from batchgate.runtime import ProviderRuntime
from batchgate.slots import FairSlots
from batchgate.trace_hooks import RequestTrace

# Rate-limit headers calibrate the pool on every answer at first, then on every 8th: enough to
# follow a provider within a fraction of a second at any useful rate, at an eighth of the parsing.
CALIBRATE_ALWAYS = 32
CALIBRATE_EVERY = 8

_log = get_logger("provider")
_req = get_logger("request")


@dataclass(slots=True)
class Send:
    """What one attempt sends: the request, its target's model, what it reserved and our count."""

    rt: ProviderRuntime
    model: str
    body: ChatBody
    cost: Cost  # as priced at admission (prompt + output on `tokens`)
    count: int  # our own count of the prompt
    timeouts: int = 0  # earlier attempts of this request that timed out
    attempt: int = 1  # this attempt's number for the request (for the logs)
    task: str | None = None  # the request's custom_id (for the logs; never sent)
    urgent: bool = False  # a live request: ahead of the others for in-flight places and slots
    hedge: Held | None = None  # the hedge's reservation, once one is taken (closed by `run`)
    trace: RequestTrace | None = None  # the request's span, when tracing is on


@dataclass(slots=True)
class _Tag:
    reservation: Reservation
    sent: float
    in_flight: int


class Attempts:
    """Runs attempts; one per scheduler."""

    def __init__(self, clock: Clock, global_slots: FairSlots, max_hint: float) -> None:
        self._clock = clock
        self._global = global_slots
        self._max_hint = max_hint
        self.stopping = False

    async def run(self, s: Send, held: Held, result: Result) -> ProviderError | None:
        """Send, settle and record one attempt; the error that ended it, or None on success. The
        in-flight place and the global slot are taken at once when free (no future, no await).
        `held` (the caller's, closed in its `finally`) and a hedge's reservation are settled
        once whatever ends it; the hedge's here."""
        rt, urgent = s.rt, s.urgent
        places, slots = rt.slots, self._global
        answered = False
        if not places.try_acquire(urgent=urgent):
            await places.acquire(urgent=urgent)
        try:
            if not slots.try_acquire(rt.name, urgent=urgent):
                await slots.acquire(rt.name, urgent=urgent)
            try:
                primary = self._leg(s, 0, held)
                timeout = rt.latency.timeout(s.timeouts)
                hedge_after = rt.latency.hedge_after()
                sent = self._clock.now()
                failure: list[ProviderError] = []
                try:
                    leg, response = await race(
                        self._clock,
                        primary,
                        deadline=sent + timeout,
                        hedge_at=None if hedge_after is None else sent + hedge_after,
                        hedge_deadline=lambda: self._hedge_deadline(s),
                        start_hedge=lambda: self._hedge(s),
                        on_failed=lambda leg, exc: failure.append(self._failed(s, leg, exc, result)),
                        on_cancelled=lambda leg, won: self._abandoned(s, leg, won, result, failure),
                    )
                    answered = True
                except RaceTimeout:
                    return failure[0] if failure else RequestTimeout("timed out", provider=rt.name)
                except ProviderError as exc:
                    return exc
            finally:
                slots.release(rt.name)
        finally:
            places.release()
            if s.hedge is not None and not answered:  # a hedge taken, no answer: settled once
                s.hedge.close()
        try:
            self._succeeded(s, leg, response, result)  # settles the winner's reservation
        finally:
            if s.hedge is not None:  # (settled by now, unless `_succeeded` failed)
                s.hedge.close()
        return None

    def _leg(self, s: Send, index: int, held: Held) -> Leg[ProviderResponse]:
        rt, reservation = s.rt, held.reservation
        rt.recorder.requests += 1
        rt.recorder.in_flight += 1
        # on a new connection the bytes leave only once it is made: the window counts from then,
        # when the transport calls `on_wire` (both chat transports do)
        held.on_wire(restamp=False)
        on_wire = sending(lambda: rt.pool.sent(reservation))
        task = asyncio.create_task(rt.client.send(s.body, model=s.model), context=on_wire)
        task.add_done_callback(lambda _: _left(rt))
        in_flight = rt.recorder.in_flight
        return Leg(index, task, _Tag(reservation, self._clock.now(), in_flight))

    def _hedge_deadline(self, s: Send) -> float:
        """When both legs of a hedged attempt are given up: the hedge's timeout from now, as the
        provider's latencies stand now — so a primary sent while they were unknown (under the
        configured maximum) is not waited for that long if the hedge hangs too."""
        return self._clock.now() + s.rt.latency.timeout(s.timeouts)

    async def _hedge(self, s: Send) -> Leg[ProviderResponse] | None:
        if self.stopping or not s.rt.breaker.available(self._clock.now()):
            return None
        pool = s.rt.pool
        if not s.urgent:  # while others queue the quota is theirs; a live request's latency is not
            await pool.drained()
        held = s.hedge = Held(pool, await pool.acquire(s.cost, count=s.count, urgent=True))
        if pool.shared is not None:
            try:
                await pool.shared.take(held.reservation, urgent=True)
            except QuotaStoreUnavailable:
                held.close()  # not sent: refunded
                return None  # no hedge; the primary goes on
        s.rt.recorder.hedged += 1
        event(_log, INFO, "hedge_fired", provider=s.rt.name, task=s.task, attempt=s.attempt)
        return self._leg(s, 1, held)

    def _succeeded(
        self, s: Send, leg: Leg[ProviderResponse], response: ProviderResponse, result: Result
    ) -> None:
        rt, tag = s.rt, _tag(leg)
        now = self._clock.now()
        latency = now - tag.sent
        usage = response.usage
        succeeded = rt.recorder.succeeded
        read = succeeded < CALIBRATE_ALWAYS or succeeded % CALIBRATE_EVERY == 0
        snapshot = rt.client.rate_limits(response.headers, self._clock.wall()) if read else None
        rt.pool.settle(tag.reservation, Outcome.answered(usage, s.count, snapshot))
        rt.counter.observe(s.body, usage.prompt_tokens)
        rt.latency.observe(latency)
        if rt.concurrency.on_success(now, tag.in_flight, tag.sent):
            rt.slots.set_limit(rt.concurrency.limit)
        if rt.breaker.opened and rt.breaker.state(now) != "closed":
            event(_log, INFO, "circuit_closed", provider=rt.name, task=s.task, attempt=s.attempt)
        rt.breaker.record_success(now)
        rt.recorder.record_success(latency * 1000.0, usage.prompt_tokens, usage.completion_tokens)
        result.attempts.append(
            Attempt(rt.name, tag.sent, latency * 1000.0, response.status, tokens_charged=s.cost.tokens)
        )
        result.ok = True
        result.body = response.body
        result.provider = rt.name
        result.model = s.model
        result.status_code = response.status
        result.request_id = response.request_id
        result.usage = usage

    def _abandoned(
        self, s: Send, leg: Leg[ProviderResponse], won: bool, result: Result, failure: list[ProviderError]
    ) -> None:
        """A leg cancelled: the other leg won (duplicate spend) or the deadline passed (a timeout)."""
        rt, tag = s.rt, _tag(leg)
        if won:
            rt.pool.settle(tag.reservation, ABANDONED)  # the provider admitted and charged it
            rt.recorder.duplicate_tokens += s.cost.input_tokens
            if s.trace is not None:
                s.trace.leg_lost(rt.name, tag.sent, self._clock.now())
            return
        exc = RequestTimeout(f"{rt.name}: no answer within the adaptive timeout", provider=rt.name)
        failure.append(self._failed(s, leg, exc, result))

    def _failed(
        self, s: Send, leg: Leg[ProviderResponse], exc: BaseException, result: Result
    ) -> ProviderError:
        rt, tag = s.rt, _tag(leg)
        if not isinstance(exc, ProviderError):
            raise exc
        now = self._clock.now()
        charged = s.cost.input_tokens
        if isinstance(exc, RateLimitError):
            charged = 0
            self._refused(s, tag, exc, now)
        elif isinstance(exc, UnreachableError):
            rt.pool.settle(tag.reservation, UNSENT)  # refused or unresolvable: nothing was sent
            charged = 0
            rt.recorder.record_unreachable(exc.cause)
        elif isinstance(exc, TLSError):
            rt.pool.settle(tag.reservation, UNSENT)  # the handshake failed: nothing was sent
            charged = 0
        else:  # a 5xx, a timeout, a reset, a garbled answer: it left, what it cost is unknown
            rt.pool.settle(tag.reservation, SENT_UNKNOWN)
        if counts_as_failure(exc):
            opened = rt.breaker.opened
            rt.breaker.record_failure(now)
            if rt.breaker.opened != opened:
                event(
                    _log,
                    WARNING,
                    "circuit_opened",
                    provider=rt.name,
                    error=exc.kind,
                    open_s=rt.breaker.settings.open_seconds,
                    task=s.task,
                    attempt=s.attempt,
                )
        latency = (now - tag.sent) * 1000.0
        if enabled(_req, DEBUG):
            event(
                _req,
                DEBUG,
                "attempt_failed",
                provider=rt.name,
                error=exc.kind,
                status=exc.status,
                latency_ms=round(latency, 1),
                task=s.task,
                attempt=s.attempt,
            )
        rt.recorder.record_failure(exc.kind, latency, charged)
        result.attempts.append(
            Attempt(rt.name, tag.sent, latency, exc.status, exc.kind, exc.message, charged)
        )
        result.provider = rt.name
        result.status_code = exc.status
        return exc

    def _refused(self, s: Send, tag: _Tag, exc: RateLimitError, now: float) -> None:
        """A 429, settled with what it says (its headers, retry hint, the rate limit its body
        names); one the pool finds bare — no rate at fault — is a server turning away what
        exceeds its in-flight cap (local servers, proxies): the in-flight limit learns it."""
        rt, wall = s.rt, self._clock.wall()
        snapshot = rt.client.rate_limits(exc.headers, wall)
        hint = parse_retry_hint(exc.headers, wall, max_hint=self._max_hint)
        outcome = Outcome.refused(s.count, snapshot, hint, error_fields(exc.body)[0])
        if rt.pool.settle(tag.reservation, outcome) and rt.concurrency.on_refused(tag.in_flight, now):
            rt.slots.set_limit(rt.concurrency.limit)
            event(_log, INFO, "inflight_limit_learned", provider=rt.name, limit=rt.concurrency.limit)


def _tag(leg: Leg[ProviderResponse]) -> _Tag:
    tag = leg.tag
    assert isinstance(tag, _Tag)
    return tag


def _left(rt: ProviderRuntime) -> None:
    rt.recorder.in_flight -= 1
