"""One attempt of one request at one target, once quota is reserved: the wire and what it teaches.

The call runs under the provider's learned in-flight limit and the global fair slots, with the
provider's adaptive timeout; a straggler is hedged (`batchgate.racing`: sent again with quota
reserved at the head of the pool's queue, first answer wins, the loser cancelled and its charge
counted as duplicate spend) — but only with quota nobody queues for: while requests wait at the
pool, a hedge would take the place of one of them, and the adaptive timeout ends a hang at no cost
to the job, so the hedge waits until the queue drains (the job's tail; a live request's hedge does
not wait: its latency is the point). Every answer feeds the provider's models: success → the charge
model (usage against our count), header calibration, AIMD, the latency model, the in-flight limit
and the breaker; failure → 429s to the charge model (by the dimension the provider names) or to the
in-flight limit (a refusal that names no exhausted dimension), breaker failures by
`counts_as_failure` (so a 200 with a malformed body counts too). What changes a provider's state is
logged as an event (`batchgate.logs`): a limit learned from headers, an AIMD cut, a pause from a
retry hint, a learned in-flight cap, the circuit opening or closing, a hedge fired.
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
    UnreachableError,
)
from batchgate.logs import DEBUG, INFO, WARNING, enabled, event, get_logger
from batchgate.models import Attempt, ChatBody, Cost, ProviderResponse, RateLimitSnapshot, Result
from batchgate.policy.circuit import counts_as_failure
from batchgate.policy.hints import parse_retry_hint
from batchgate.providers.classify import error_fields
from batchgate.providers.wire import sending
from batchgate.quota.charge import PROMPT_DIMENSIONS, binding_dimension
from batchgate.quota.pool import Reservation
from batchgate.racing import Leg, RaceTimeout, race
from batchgate.runtime import ProviderRuntime
from batchgate.slots import FairSlots

# Rate-limit headers calibrate the pool on every answer at first, then on every 8th: enough to
# follow a provider within a fraction of a second at any useful rate, at an eighth of the parsing.
CALIBRATE_ALWAYS = 32
CALIBRATE_EVERY = 8
OUTPUT_KEPT_AFTER = 3  # 429s on output tokens that show a provider keeps max_tokens charged
OUTPUT_EMPTY = 0.1  # ... or its headers showing at most this share of its output bucket left

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

    async def run(self, s: Send, reservation: Reservation, result: Result) -> ProviderError | None:
        """Send, settle and record one attempt; the error that ended it, or None on success."""
        rt = s.rt
        async with rt.slots.place(urgent=s.urgent), self._global.slot(rt.name, urgent=s.urgent):
            primary = self._leg(s, 0, reservation)
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
            except RaceTimeout:
                return failure[0] if failure else RequestTimeout("timed out", provider=rt.name)
            except ProviderError as exc:
                return exc
        self._succeeded(s, leg, response, result)
        return None

    def _leg(self, s: Send, index: int, reservation: Reservation) -> Leg[ProviderResponse]:
        rt = s.rt
        rt.recorder.requests += 1
        rt.recorder.in_flight += 1
        rt.pool.sent(reservation)
        # on a new connection the bytes leave only once it is made: the window counts from then
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
        reservation = await pool.acquire(s.cost, count=s.count, urgent=True)
        if pool.shared is not None:
            try:
                await pool.shared.take(reservation, urgent=True)
            except QuotaStoreUnavailable:
                pool.refund(reservation)
                return None  # no hedge; the primary goes on
            except asyncio.CancelledError:
                pool.refund(reservation)
                raise
        s.rt.recorder.hedged += 1
        event(_log, INFO, "hedge_fired", provider=s.rt.name, task=s.task, attempt=s.attempt)
        return self._leg(s, 1, reservation)

    def _succeeded(
        self, s: Send, leg: Leg[ProviderResponse], response: ProviderResponse, result: Result
    ) -> None:
        rt, tag = s.rt, _tag(leg)
        now = self._clock.now()
        latency = now - tag.sent
        usage = response.usage
        rt.pool.observe_usage(s.count, usage.prompt_tokens)
        cost = tag.reservation.cost
        rt.pool.reconcile(
            tag.reservation, usage, prompt_estimate=cost.tokens - cost.output_tokens, count=s.count
        )
        rt.counter.observe(s.body, usage.prompt_tokens)
        if rt.recorder.succeeded < CALIBRATE_ALWAYS or rt.recorder.succeeded % CALIBRATE_EVERY == 0:
            _calibrate(rt, rt.client.rate_limits(response.headers, self._clock.wall()))
        if rt.pool.on_success() and enabled(_log, DEBUG):
            event(_log, DEBUG, "aimd_raise", provider=rt.name, factor=round(rt.pool.aimd.factor, 4))
        rt.latency.observe(latency)
        if rt.concurrency.on_success(now):
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
            rt.pool.settle(tag.reservation)  # the provider admitted and charged it
            rt.recorder.duplicate_tokens += s.cost.input_tokens
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
            rt.pool.refund(tag.reservation)  # refused or unresolvable: nothing was sent, nothing charged
            charged = 0
            rt.recorder.record_unreachable(exc.cause)
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
        """A 429: which limit said no. A bare one — no retry hint, no rate-limit headers, no rate
        limit named in its body — is a server turning away what exceeds its in-flight cap (local
        servers, proxies): learn the cap, nothing was charged, no rate is at fault. Otherwise a
        rate: a token dimension the provider names may raise the charge margin, or be explained
        by what the model learned since the request was priced (then the rate's AIMD is spared:
        the reservations were short, not the pace); anything else goes to the AIMD."""
        rt = s.rt
        wall = self._clock.wall()
        snapshot = rt.client.rate_limits(exc.headers, wall)
        hint = parse_retry_hint(exc.headers, wall, max_hint=self._max_hint)
        named = binding_dimension(error_fields(exc.body)[0], None)  # the body names a rate limit
        bare = hint is None and snapshot == _NOTHING and named is None
        if bare or not rt.pool.limited():
            if rt.concurrency.on_refused(tag.in_flight, now):
                rt.slots.set_limit(rt.concurrency.limit)
                event(_log, INFO, "inflight_limit_learned", provider=rt.name, limit=rt.concurrency.limit)
            rt.pool.refund(tag.reservation)  # turned away at the door: nothing charged
            _pause(rt, hint)
            return
        dim = binding_dimension(error_fields(exc.body)[0], snapshot)
        if dim == "output_tokens":
            _output_refused(rt)
        admitted = tag.reservation.admitted_at
        raises, before = rt.pool.charges.raises, rt.pool.charges.margin(dim) if dim else 1.0
        cost = tag.reservation.cost
        prompt = cost.tokens - cost.output_tokens if dim == "tokens" else cost.input_tokens
        reserved = prompt / s.count if s.count > 0 else None  # per unit of our count
        explained = dim in PROMPT_DIMENSIONS and rt.pool.charges.on_rate_limited(dim, now, admitted, reserved)
        if rt.pool.charges.raises != raises and dim is not None:
            margin = rt.pool.charges.margin(dim)
            rt.pool.charge_raised(dim, margin / before)
            event(
                _log, INFO, "charge_margin_raised", provider=rt.name, dimension=dim, margin=round(margin, 4)
            )
        if rt.pool.on_rate_limited(tag.reservation, rate_at_fault=not explained):
            event(
                _log,
                WARNING,
                "aimd_cut",
                provider=rt.name,
                dimension=dim,
                factor=round(rt.pool.aimd.factor, 4),
                cuts=rt.pool.aimd.cuts,
            )
        _pause(rt, hint)
        _calibrate(rt, snapshot)


_NOTHING = RateLimitSnapshot()


def _tag(leg: Leg[ProviderResponse]) -> _Tag:
    tag = leg.tag
    assert isinstance(tag, _Tag)
    return tag


def _left(rt: ProviderRuntime) -> None:
    rt.recorder.in_flight -= 1


def _calibrate(rt: ProviderRuntime, snapshot: RateLimitSnapshot) -> None:
    """Follow the provider's rate-limit headers; a limit learned from them is an event."""
    before = rt.pool.count("calibrations")
    _output_emptied(rt, snapshot)
    rt.pool.calibrate(snapshot)
    if rt.pool.count("calibrations") != before:
        limits = rt.pool.statistics().limits_per_minute
        event(
            _log,
            INFO,
            "limit_learned",
            provider=rt.name,
            source="headers",
            limits_per_minute={k: round(v, 3) for k, v in limits.items()},
        )


def _output_refused(rt: ProviderRuntime) -> None:
    """A 429 on output tokens. A provider whose output charge is only assumed to be settled to the
    real output (by its kind: Anthropic documents it) but that keeps `max_tokens` charged refuses
    again and again what the settled charge admits: after `OUTPUT_KEPT_AFTER` such 429s its
    output charge is taken as kept. A configured `output_charge` is never second-guessed."""
    if not rt.pool.output_adjusted or rt.config.output_charge is not None:
        return
    rt.output_refusals += 1
    if rt.output_refusals >= OUTPUT_KEPT_AFTER:
        _output_kept(rt)


def _output_emptied(rt: ProviderRuntime, snapshot: RateLimitSnapshot) -> None:
    """The provider's headers show its output bucket (nearly) empty: one that settled output to
    the real answers would hold only what requests in flight reserved, at most the second of its
    OTPM we let them hold — so it keeps `max_tokens` charged; learned before its 429s say so."""
    remaining, limit = snapshot.remaining_output_tokens, snapshot.limit_output_tokens
    assumed = rt.pool.output_adjusted and rt.config.output_charge is None
    if assumed and remaining is not None and limit and remaining <= OUTPUT_EMPTY * limit:
        _output_kept(rt)


def _output_kept(rt: ProviderRuntime) -> None:
    rt.pool.settles_output(False)
    event(_log, WARNING, "output_charge_learned", provider=rt.name, output_charge="max_tokens")


def _pause(rt: ProviderRuntime, hint: float | None) -> None:
    """A retry hint pauses the provider's pool; a pause that starts (not one extended) is an event."""
    if hint is None or hint <= 0:
        return
    paused = rt.pool.statistics().paused_until is not None
    rt.pool.pause(hint)
    if not paused:
        event(_log, INFO, "paused", provider=rt.name, seconds=round(hint, 3), source="retry_hint")
