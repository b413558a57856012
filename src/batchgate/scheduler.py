"""The scheduler decides *when*: it carries one request through routing, the quota pool (and the
key's shared quota, when other processes share it), the concurrency slots, the provider call and
the retry policy, recording every attempt.

Order per attempt: pick a target by expected wait and headroom (`policy.routing.choose_target`
over the targets whose circuit is available) → reserve the estimated cost in that provider's
quota pool (our own prompt count scaled by what that provider is learned to charge; an
event-driven wait, never while holding a slot) → send under the learned in-flight limit with the
adaptive timeout, hedging a straggler (`batchgate.attempt`) → ask the retry policy what to do.
Every retry goes through the pool again. A retry that lands on another target than the attempt
before is logged as a `failover` event (`batchgate.logs`); each retry's delay at debug level.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from batchgate.attempt import Attempts, Send
from batchgate.clock import Clock
from batchgate.endpoints import request_problem
from batchgate.errors import (
    BatchgateError,
    DispatchStopped,
    InternalError,
    InvalidRequestError,
    NeverFitsError,
    NoTargetLeft,
    ProviderError,
    RequestTimeout,
    RoutingError,
)
from batchgate.logs import DEBUG, INFO, WARNING, enabled, event, get_logger
from batchgate.models import Attempt, ChatBody, Cost, Result, requested_output_tokens, unpriced
from batchgate.policy.circuit import counts_as_failure
from batchgate.policy.retry import RetryPolicy
from batchgate.policy.routing import choose_target
from batchgate.policy.takeout import allowed, stop_line
from batchgate.quota.held import Held
from batchgate.quota.pool import QuotaPool, Reservation
from batchgate.runtime import ProviderRuntime
from batchgate.slots import FairSlots


@dataclass(frozen=True, slots=True)
class Target:
    runtime: ProviderRuntime
    model: str


_log = get_logger("provider")
_req = get_logger("request")

Candidate = tuple[Target, Cost, int, int]  # a target, the cost there, its prompt part, our count


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
        self._attempts = Attempts(clock, global_slots, retry.settings.max_hint)
        self.items_succeeded = 0
        self.items_failed = 0
        self.backing_off = 0  # requests sleeping before a retry (neither sent nor waiting for quota)
        self._stopping = False
        self._acquiring: set[asyncio.Future[Any]] = set()
        self._queued: dict[asyncio.Future[Any], QuotaPool] = {}  # waits for a pool's quota

    def targets_for(self, model: str) -> Sequence[Target]:
        targets = self._routes.get(model)
        if not targets:
            known = ", ".join(sorted(self._routes)) or "none"
            raise RoutingError(f"no route for model {model!r} (routes: {known})")
        return targets

    def estimate(
        self, target: Target, body: Mapping[str, Any], counted: dict[int, int] | None = None
    ) -> tuple[Cost, int]:
        """What `body` would reserve at `target` and its prompt part; `counted` shares prompt
        counts between targets that use the same counter."""
        cost, prompt, _ = self._estimate(target, body, counted)
        return cost, prompt

    def _estimate(
        self, target: Target, body: Mapping[str, Any], counted: dict[int, int] | None
    ) -> tuple[Cost, int, int]:
        rt = target.runtime
        key = id(rt.counter)
        count = counted.get(key) if counted is not None else None
        if count is None:
            count = rt.counter.count_prompt(body)
            if counted is not None:
                counted[key] = count
        output = requested_output_tokens(body, rt.config.default_max_tokens)
        cost = rt.pool.priced(unpriced(output), count)
        return cost, cost.tokens - output, count

    async def run(
        self, index: int, body: ChatBody, custom_id: str | None = None, *, urgent: bool = False
    ) -> Result:
        """Carry one request to its result; `urgent` (a live request) waits ahead of the others
        for quota, in-flight places and slots, and is paced like them."""
        started = self._clock.now()
        attempts: list[Attempt] = []
        result = Result(index=index, ok=False, custom_id=custom_id, attempts=attempts)
        try:
            await self._attempt_loop(body, result, custom_id, urgent)
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
        """The targets that can ever admit `body` (only those are tried); none: NeverFitsError
        naming every limit that excludes it."""
        fitting: list[Candidate] = []
        excluded: list[str] = []
        counted: dict[int, int] = {}
        for t in targets:
            cost, prompt, count = self._estimate(t, body, counted)
            try:
                t.runtime.pool.check_fits(cost)
            except NeverFitsError as exc:
                excluded.append(exc.message)
                continue
            fitting.append((t, cost, prompt, count))
        if not fitting:
            if len(excluded) == 1:
                raise NeverFitsError(excluded[0])
            raise NeverFitsError(f"no target of its route can ever admit it: {'; '.join(excluded)}")
        return fitting

    async def _attempt_loop(
        self, body: ChatBody, result: Result, task: str | None = None, urgent: bool = False
    ) -> None:
        model = body.get("model")
        if not isinstance(model, str):
            raise RoutingError("the request has no model")
        if (problem := request_problem(body)) is not None:  # what `batchgate run` refuses: never sent
            raise InvalidRequestError(problem)
        candidates = allowed(self._fitting(self.targets_for(model), body), self._refusal, model)
        attempt_no = 0
        timeouts = 0
        last: tuple[str, str] | None = None  # the previous attempt's provider and error kind
        while True:
            attempt_no += 1
            chosen, reservation = await self._acquire_any(candidates, model, urgent)
            target, _, _, count = chosen
            rt = target.runtime
            if last is not None and last[0] != rt.name:
                event(
                    _log,
                    INFO,
                    "failover",
                    provider=rt.name,
                    previous=last[0],
                    error=last[1],
                    task=task,
                    attempt=attempt_no,
                )
            held = Held(rt.pool, reservation)
            try:  # settled once whatever ends the attempt (`batchgate.quota.held`)
                if rt.pool.shared is not None:
                    await self._take_shared(rt.pool, reservation, urgent)
                send = Send(
                    rt, target.model, body, reservation.cost, count, timeouts, attempt_no, task, urgent
                )
                error = await self._attempts.run(send, held, result)
            finally:
                held.close()
            if error is None:
                return
            timeouts += isinstance(error, RequestTimeout)
            candidates, delay = self._after_failure(target, error, attempt_no, candidates, model, task)
            rt.recorder.record_retry(error.kind)
            last = (rt.name, error.kind)
            if delay > 0:
                await self._back_off(delay)

    async def _back_off(self, delay: float) -> None:
        """Wait before the next try; a stop (`stop_sending`) ends the wait with `DispatchStopped`
        (the next try is not sent), so a job that stops does not wait out its retries' backoff."""
        if self._stopping:
            raise DispatchStopped()
        nap = asyncio.ensure_future(self._clock.sleep(delay))
        self._acquiring.add(nap)
        self.backing_off += 1
        try:
            await asyncio.wait({nap})
        except asyncio.CancelledError:
            nap.cancel()
            raise
        finally:
            self._acquiring.discard(nap)
            self.backing_off -= 1
        if nap.cancelled():
            raise DispatchStopped()

    def _after_failure(
        self,
        target: Target,
        error: ProviderError,
        attempt_no: int,
        candidates: list[Candidate],
        model: str,
        task: str | None,
    ) -> tuple[list[Candidate], float]:
        """After a failed attempt: the targets still worth trying and how long to wait first;
        raises the error when the request is given up (`NoTargetLeft` when its route has no
        target left). A key refused or a target unreachable counts toward taking the target out
        (`policy.takeout`); once out, the request fails over at once. A 401/403 is retried only
        from a target that never answered (then it says the key is wrong, not the request)."""
        rt, now = target.runtime, self._clock.now()
        if rt.breaker.takeout.record(error, now):
            self._take_out(rt, task)
        if (new := rt.breaker.takeout.models.record(error, target.model, now)) is not None:
            if new:  # that (provider, model) is out; the provider's other models are not
                event(_log, WARNING, "model_out", provider=rt.name, model=target.model, task=task)
            return allowed(candidates, self._refusal, model, error), 0.0  # fail over, or fail now
        if rt.breaker.is_out(now):
            left = [c for c in candidates if not c[0].runtime.breaker.is_out(now)]
            if not left:
                raise _no_target_left(model, candidates)
            return left, 0.0  # fail over at once: bounded by the route's targets
        if rt.breaker.takeout.in_doubt(error):  # tried again until the target is known
            if attempt_no >= self._retry.settings.max_attempts:
                raise error
            return candidates, self._retry.backoff(max(1, min(attempt_no, rt.breaker.takeout.streak)))
        streak = rt.breaker.consecutive_failures if counts_as_failure(error) else None
        decision = self._retry.decide(error, attempt_no, self._clock.wall(), streak=streak)
        if not decision.retry:
            raise error
        if enabled(_req, DEBUG):
            event(
                _req,
                DEBUG,
                "retry",
                provider=rt.name,
                error=error.kind,
                task=task,
                attempt=attempt_no,
                delay_s=round(decision.delay, 3),
                hinted=decision.hinted,
                streak=streak,
            )
        return candidates, 0.0 if decision.hinted else decision.delay

    def _refusal(self, c: Candidate) -> str | None:
        return c[0].runtime.breaker.takeout.models.reason(c[0].model, self._clock.now())

    def _take_out(self, rt: ProviderRuntime, task: str | None) -> None:
        """`rt` was just taken out: say so, and wake the requests queued for its quota (they go
        to the route's other targets, or end with `NoTargetLeft`)."""
        event(_log, WARNING, "target_out", provider=rt.name, reason=rt.breaker.takeout.reason, task=task)
        for wait, pool in list(self._queued.items()):
            if pool is rt.pool:
                wait.cancel()

    def stop_sending(self) -> None:
        """From now on no request is sent: those waiting for quota or for a retry's backoff give
        up at once (reservations refunded) and fail with `DispatchStopped`; calls already sent
        finish."""
        self._stopping = True
        self._attempts.stopping = True
        for wait in self._acquiring:
            wait.cancel()

    async def _take_shared(self, pool: QuotaPool, reservation: Reservation, urgent: bool = False) -> None:
        """Pass the key's shared quota too (`pool.shared`: other processes' sends count) before
        sending; on any failure the reservation is left to its `Held`, which refunds it (nothing
        was sent)."""
        shared = pool.shared
        if shared is None or shared.take_now(reservation):  # most requests: the lease covers them
            return
        wait = asyncio.ensure_future(shared.take(reservation, urgent=urgent))
        self._acquiring.add(wait)
        try:
            await asyncio.wait({wait})
        except asyncio.CancelledError:
            wait.cancel()
            raise
        finally:
            self._acquiring.discard(wait)
        if wait.cancelled():  # stop_sending
            raise DispatchStopped()
        failure = wait.exception()
        if failure is not None:
            raise failure

    async def _acquire_any(
        self, candidates: list[Candidate], model: str, urgent: bool = False
    ) -> tuple[Candidate, Reservation]:
        """Reserve quota at whichever target still in its route admits the request first."""
        while True:
            now = self._clock.now()
            left = [c for c in candidates if not c[0].runtime.breaker.is_out(now)]
            if not left:
                raise _no_target_left(model, candidates)
            won = await self._acquire_once(left, urgent)
            if won is not None and not won[0][0].runtime.breaker.is_out(self._clock.now()):
                return won
            if won is not None:  # taken out while the request waited: nothing was sent
                won[0][0].runtime.pool.refund(won[1])

    async def _acquire_once(
        self, candidates: list[Candidate], urgent: bool = False
    ) -> tuple[Candidate, Reservation] | None:
        """Reserve quota at whichever healthy target admits the request first (None: its waits
        were at targets taken out meanwhile). The request waits in every candidate's queue at
        once and takes the first admission (the others are withdrawn, and refunded if they were
        admitted in the same instant). Binding a request to a target only when quota is really
        there keeps every target busy until the route's work runs out, so a route's throughput
        approaches the sum of its targets' quotas."""
        if self._stopping:
            raise DispatchStopped()
        now = self._clock.now()
        live = [c for c in candidates if c[0].runtime.breaker.available(now)] or candidates
        first = live[0] if len(live) == 1 else _soonest(live)
        if first is not None:
            res = first[0].runtime.pool.try_acquire(first[1], count=first[3])
            if res is not None:
                first[0].runtime.breaker.allow(now)
                return first, res
        waits = {
            asyncio.ensure_future(c[0].runtime.pool.acquire(c[1], count=c[3], urgent=urgent)): c for c in live
        }
        self._acquiring.update(waits)
        self._queued.update((w, c[0].runtime.pool) for w, c in waits.items())
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            for w, c in waits.items():
                if w.done() and not w.cancelled() and w.exception() is None:
                    c[0].runtime.pool.refund(w.result())
            raise
        finally:
            self._acquiring.difference_update(waits)
            for w in waits:
                self._queued.pop(w, None)
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
            if failure is not None:
                raise failure
            return None  # every wait was cancelled by a take-out (`_take_out`)
        winner[0][0].runtime.breaker.allow(self._clock.now())
        return winner


def _no_target_left(model: str, candidates: list[Candidate]) -> NoTargetLeft:
    return NoTargetLeft(
        stop_line(model, [(c[0].runtime.name, c[0].runtime.breaker.takeout) for c in candidates])
    )


def _soonest(live: list[Candidate]) -> Candidate | None:
    """Among the targets with nobody queued (their wait estimate is cheap and any queued one
    could not admit at once anyway), the one that can serve soonest (`choose_target`)."""
    return choose_target(
        [c for c in live if not c[0].runtime.pool.busy()],
        wait_of=lambda c: c[0].runtime.pool.wait_estimate(c[1]),
        headroom_of=lambda c: c[0].runtime.pool.headroom(),
        allowed=lambda c: True,
    )
