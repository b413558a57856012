"""The scheduler decides *when*: it carries one request through routing, the quota pool, the
concurrency slots, the provider call and the retry policy, recording every attempt.

Order per attempt: pick a target by expected wait and headroom (routing policy, circuit breakers)
→ reserve the estimated cost in that provider's quota pool (event-driven wait; never while holding
a slot) → take the provider's and the global concurrency slot → send → reconcile the reservation
with real usage and calibrate from headers, or classify the failure, feed AIMD / the breaker /
the pool pause, and ask the retry policy what to do. Every retry goes through the pool again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from batchgate.clock import Clock
from batchgate.errors import (
    BatchgateError,
    DispatchStopped,
    InternalError,
    NeverFitsError,
    ProviderError,
    RateLimitError,
    RoutingError,
    UnreachableError,
)
from batchgate.models import Attempt, ChatBody, Cost, ProviderResponse, Result, requested_output_tokens
from batchgate.policy.hints import parse_retry_hint
from batchgate.policy.retry import RetryPolicy
from batchgate.quota.pool import Reservation
from batchgate.runtime import ProviderRuntime
from batchgate.slots import FairSlots


@dataclass(frozen=True, slots=True)
class Target:
    runtime: ProviderRuntime
    model: str


# Rate-limit headers calibrate the pool on every answer at first, then on every 8th: enough to
# follow a provider within a fraction of a second at any useful rate, at an eighth of the parsing.
CALIBRATE_ALWAYS = 32
CALIBRATE_EVERY = 8

Candidate = tuple[Target, Cost, int]  # a target, what the request costs there, its prompt estimate


class Scheduler:
    def __init__(
        self,
        routes: Mapping[str, Sequence[Target]],
        *,
        clock: Clock,
        retry: RetryPolicy,
        global_slots: FairSlots,
    ) -> None:
        self._routes = routes
        self._clock = clock
        self._retry = retry
        self._global = global_slots
        self.items_succeeded = 0
        self.items_failed = 0
        self._stopping = False
        self._acquiring: set[asyncio.Future[Reservation]] = set()

    def targets_for(self, model: str) -> Sequence[Target]:
        targets = self._routes.get(model)
        if not targets:
            known = ", ".join(sorted(self._routes)) or "none"
            raise RoutingError(f"no route for model {model!r} (routes: {known})")
        return targets

    def estimate(
        self, target: Target, body: Mapping[str, Any], counted: dict[int, int] | None = None
    ) -> tuple[Cost, int]:
        """What `body` would reserve at `target`; `counted` shares prompt counts between targets
        that use the same counter (an exact tokenizer is shared by every provider using it)."""
        rt = target.runtime
        key = id(rt.counter)
        prompt = counted.get(key) if counted is not None else None
        if prompt is None:
            prompt = rt.counter.count_prompt(body)
            if counted is not None:
                counted[key] = prompt
        output = requested_output_tokens(body, rt.config.default_max_tokens)
        return Cost(requests=1, tokens=prompt + output, input_tokens=prompt, output_tokens=output), prompt

    async def run(self, index: int, body: ChatBody, custom_id: str | None = None) -> Result:
        started = self._clock.now()
        attempts: list[Attempt] = []
        result = Result(index=index, ok=False, custom_id=custom_id, attempts=attempts)
        try:
            await self._attempt_loop(body, result)
        except BatchgateError as exc:
            result.error = exc
        except Exception as exc:  # a bug must cost this one item, never the whole batch
            result.error = InternalError.of(exc)
        result.latency_ms = (self._clock.now() - started) * 1000.0
        if result.ok:
            self.items_succeeded += 1
        else:
            self.items_failed += 1
        return result

    def _fitting(self, targets: Sequence[Target], body: ChatBody) -> list[Candidate]:
        fitting: list[Candidate] = []
        last: NeverFitsError | None = None
        counted: dict[int, int] = {}
        for t in targets:
            cost, prompt = self.estimate(t, body, counted)
            try:
                t.runtime.pool.check_fits(cost)
            except NeverFitsError as exc:
                last = exc
                continue
            fitting.append((t, cost, prompt))
        if not fitting:
            assert last is not None
            raise last
        return fitting

    async def _attempt_loop(self, body: ChatBody, result: Result) -> None:
        model = body.get("model")
        if not isinstance(model, str):
            raise RoutingError("the request has no model")
        candidates = self._fitting(self.targets_for(model), body)
        attempt_no = 0
        while True:
            attempt_no += 1
            chosen, reservation = await self._acquire_any(candidates)
            target, cost, prompt = chosen
            error = await self._attempt(target, body, cost, prompt, reservation, result)
            if error is None:
                return
            decision = self._retry.decide(error, attempt_no, self._clock.wall())
            if not decision.retry:
                raise error
            target.runtime.recorder.retries += 1
            if decision.delay > 0 and not decision.hinted:
                await self._clock.sleep(decision.delay)

    def stop_sending(self) -> None:
        """From now on no request is sent: those waiting for quota give up at once (their
        reservations refunded) and fail with `DispatchStopped`; calls already sent finish."""
        self._stopping = True
        for wait in self._acquiring:
            wait.cancel()

    async def _acquire_any(self, candidates: list[Candidate]) -> tuple[Candidate, Reservation]:
        """Reserve quota at whichever healthy target admits the request first.

        The request waits in every candidate's queue at once and takes the first admission (the
        others are withdrawn, and refunded if they were admitted in the same instant). Binding a
        request to a target only when quota is really there keeps every target busy until the
        route's work runs out, so a route's throughput approaches the sum of its targets' quotas.
        """
        if self._stopping:
            raise DispatchStopped()
        now = self._clock.now()
        live = [c for c in candidates if c[0].runtime.breaker.available(now)] or candidates
        ranked = live if len(live) == 1 else sorted(live, key=lambda c: -c[0].runtime.pool.headroom())
        for c in ranked:
            res = c[0].runtime.pool.try_acquire(c[1])
            if res is not None:
                c[0].runtime.breaker.allow(now)
                return c, res
        waits = {asyncio.ensure_future(c[0].runtime.pool.acquire(c[1])): c for c in live}
        self._acquiring.update(waits)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            for w, c in waits.items():
                if w.done() and not w.cancelled() and w.exception() is None:
                    c[0].runtime.pool.refund(w.result())
            raise
        finally:
            self._acquiring.difference_update(waits)
            pending = [w for w in waits if not w.done()]
            for w in pending:
                w.cancel()
            if pending:  # a waiter admitted as it is cancelled gives its admission back itself
                await asyncio.gather(*pending, return_exceptions=True)
        winner: tuple[Candidate, Reservation] | None = None
        failure: BaseException | None = None
        for w, c in waits.items():
            if w.cancelled():
                continue
            exc = w.exception()
            if exc is not None:
                failure = failure or exc
            elif winner is None and not self._stopping:
                winner = (c, w.result())
            else:
                c[0].runtime.pool.refund(w.result())  # admitted in the same instant: give it back
        if winner is None:
            if self._stopping:
                raise DispatchStopped()
            assert failure is not None
            raise failure
        winner[0][0].runtime.breaker.allow(self._clock.now())
        return winner

    async def _attempt(
        self,
        target: Target,
        body: ChatBody,
        cost: Cost,
        prompt: int,
        reservation: Reservation,
        result: Result,
    ) -> ProviderError | None:
        rt = target.runtime
        async with rt.slots, self._global.slot(rt.name):
            rt.recorder.requests += 1
            rt.recorder.in_flight += 1
            sent = self._clock.now()
            try:
                response: ProviderResponse = await rt.client.send(body, model=target.model)
            except ProviderError as exc:
                latency = (self._clock.now() - sent) * 1000.0
                self._on_failure(rt, exc, reservation, cost, latency, sent, result)
                return exc
            finally:
                rt.recorder.in_flight -= 1
        latency = (self._clock.now() - sent) * 1000.0
        usage = response.usage
        rt.pool.reconcile(reservation, usage, prompt_estimate=prompt)
        rt.counter.observe(body, usage.prompt_tokens)
        if rt.recorder.succeeded < CALIBRATE_ALWAYS or rt.recorder.succeeded % CALIBRATE_EVERY == 0:
            rt.pool.calibrate(rt.client.rate_limits(response.headers, self._clock.wall()))
        rt.pool.on_success()
        rt.breaker.record_success(self._clock.now())
        rt.recorder.record_success(latency, usage.prompt_tokens, usage.completion_tokens)
        result.attempts.append(
            Attempt(
                provider=rt.name,
                started=sent,
                latency_ms=latency,
                status=response.status,
                tokens_charged=cost.tokens,
            )
        )
        result.ok = True
        result.body = response.body
        result.provider = rt.name
        result.model = target.model
        result.status_code = response.status
        result.request_id = response.request_id
        result.usage = usage
        return None

    def _on_failure(
        self,
        rt: ProviderRuntime,
        exc: ProviderError,
        reservation: Reservation,
        cost: Cost,
        latency: float,
        sent: float,
        result: Result,
    ) -> None:
        now = self._clock.now()
        charged = cost.input_tokens
        if isinstance(exc, RateLimitError):
            # The provider refused at the door: it charged nothing, but it told us we are too fast.
            rt.pool.on_rate_limited(reservation)
            charged = 0
            hint = parse_retry_hint(exc.headers, self._clock.wall(), max_hint=self._retry.settings.max_hint)
            if hint is not None and hint > 0:
                rt.pool.pause(hint)
            rt.pool.calibrate(rt.client.rate_limits(exc.headers, self._clock.wall()))
        elif isinstance(exc, UnreachableError):
            rt.pool.refund(reservation)  # refused or unresolvable: nothing was sent, nothing charged
            charged = 0
        if exc.status is None or exc.status >= 500:
            rt.breaker.record_failure(now)
        rt.recorder.record_failure(exc.kind, latency, charged)
        result.attempts.append(
            Attempt(
                provider=rt.name,
                started=sent,
                latency_ms=latency,
                status=exc.status,
                error_kind=exc.kind,
                error_message=exc.message,
                tokens_charged=charged,
            )
        )
        result.provider = rt.name
        result.status_code = exc.status
