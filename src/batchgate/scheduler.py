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
With tracing on (`batchgate.trace_hooks`), `run` starts the request's span and ends it with its
`Result`, each attempt's wait for quota added to it; off, that is one test against None.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from batchgate import trace_hooks
from batchgate.admission import Admission, Candidate, Target
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
    RouteStopped,
    RoutingError,
)
from batchgate.logs import DEBUG, INFO, WARNING, enabled, event, get_logger
from batchgate.models import Attempt, ChatBody, Cost, Result, requested_output_tokens, unpriced
from batchgate.policy.circuit import counts_as_failure
from batchgate.policy.retry import RetryPolicy
from batchgate.policy.takeout import allowed, stop_line
from batchgate.quota.held import Held
from batchgate.quota.pool import Reservation
from batchgate.runtime import ProviderRuntime
from batchgate.slots import FairSlots
from batchgate.trace_hooks import RequestTrace

__all__ = ["Scheduler", "Target"]  # `Target` lives in `admission`; the gateway imports it here

_log = get_logger("provider")
_req = get_logger("request")


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
        self._admit = Admission(clock)

    def targets_for(self, model: str) -> Sequence[Target]:
        targets = self._routes.get(model)
        if not targets:
            known = ", ".join(sorted(self._routes)) or "none"
            raise RoutingError(f"no route for model {model!r} (routes: {known})")
        return targets

    def estimate(
        self, target: Target, body: Mapping[str, object], counted: dict[int, int] | None = None
    ) -> tuple[Cost, int]:
        """What `body` would reserve at `target` and its prompt part; `counted` shares prompt
        counts between targets that use the same counter."""
        cost, prompt, _ = self._estimate(target, body, counted)
        return cost, prompt

    def _estimate(
        self, target: Target, body: Mapping[str, object], counted: dict[int, int] | None
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
        tracer = trace_hooks.tracer  # None unless tracing is on (`batchgate.trace_hooks`)
        trace = None if tracer is None else tracer.request(self._clock, body, custom_id, urgent)
        try:
            await self._attempt_loop(body, result, custom_id, urgent, trace)
        except BatchgateError as exc:
            result.error = exc
        except Exception as exc:  # a bug must cost this one item, never the whole batch
            result.error = InternalError.of(exc)
        finally:
            if trace is not None:
                trace.end(result, self._clock.now())
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
        self,
        body: ChatBody,
        result: Result,
        task: str | None = None,
        urgent: bool = False,
        trace: RequestTrace | None = None,
    ) -> None:
        model = body.get("model")
        if not isinstance(model, str):
            raise RoutingError("the request has no model")
        if (problem := request_problem(body)) is not None:  # what `batchgate run` refuses: never sent
            raise InvalidRequestError(problem)
        candidates = allowed(self._fitting(self.targets_for(model), body), self._refusal, model)
        attempt_no = spent = timeouts = 0  # spent: the attempts that count (a paused target's do not)
        last: tuple[str, str] | None = None  # the previous attempt's provider and error kind
        while True:
            attempt_no += 1
            waiting = self._clock.now() if trace is not None else 0.0
            chosen, reservation, probe = await self._acquire_any(candidates, model, urgent)
            if trace is not None:
                trace.quota_waited(self._clock.now() - waiting)
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
            send = Send(rt, target.model, body, reservation.cost, count, timeouts, attempt_no, task, urgent)
            send.trace = trace
            try:  # settled once whatever ends the attempt (`batchgate.quota.held`); a probe that
                # ends here in any way hands its turn on (`_after_attempt`)
                if rt.pool.shared is not None:
                    await self._admit.take_shared(rt.pool, reservation, urgent)
                error = await self._attempts.run(send, held, result)
                if error is None:
                    return
                timeouts += isinstance(error, RequestTimeout)
                spent += 1
                candidates, delay = self._after_failure(target, error, spent, candidates, model, task, probe)
            finally:
                held.close()
                self._after_attempt(rt, probe, task)
            if delay < 0:  # the target is paused: this attempt is not spent, the request waits
                spent, delay = spent - 1, 0.0
            rt.recorder.record_retry(error.kind)
            last = (rt.name, error.kind)
            if delay > 0:
                await self._back_off(delay)

    async def _back_off(self, delay: float) -> None:
        """Wait before the next try; a stop (`stop_sending`) ends the wait with `DispatchStopped`
        (the next try is not sent), so a job that stops does not wait out its retries' backoff."""
        if self._admit.stopping:
            raise DispatchStopped()
        nap = asyncio.ensure_future(self._clock.sleep(delay))
        self._admit.acquiring.add(nap)
        self.backing_off += 1
        try:
            await asyncio.wait({nap})
        except asyncio.CancelledError:
            nap.cancel()
            raise
        finally:
            self._admit.acquiring.discard(nap)
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
        probe: bool = False,
    ) -> tuple[list[Candidate], float]:
        """After a failed attempt: the targets still worth trying and how long to wait first
        (-1: the target is paused, the attempt not spent); raises the error when the request is
        given up (`NoTargetLeft` when its route has no target left). A key refused or a target
        unreachable counts toward taking the target out, or pausing it when it answered before
        (`policy.takeout`); once out, the request fails over at once. A 401/403 is retried only
        from a target that never answered (then it says the key is wrong, not the request)."""
        rt, now = target.runtime, self._clock.now()
        verdict = rt.breaker.takeout.record(error, now, probe=probe)
        if verdict == "out":
            self._take_out(rt, task)
        elif verdict == "paused":
            if rt.pauses.began():
                self._pause(rt, task)
            return candidates, -1.0
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
        """`rt` was just taken out: say so, and wake the requests queued for its quota or waiting
        out its pause (they go to the route's other targets, or end with `NoTargetLeft`)."""
        event(_log, WARNING, "target_out", provider=rt.name, reason=rt.breaker.takeout.reason, task=task)
        rt.pauses.ended()
        self._admit.requeue(rt.pool)

    def _pause(self, rt: ProviderRuntime, task: str | None) -> None:
        """`rt` was just paused: say so, and send the requests queued for its quota to wait out
        the pause (or to the route's other targets)."""
        pause = rt.breaker.takeout.pause
        assert pause is not None
        since = self._clock.wall() - (self._clock.now() - pause.since)
        event(
            _log,
            WARNING,
            "target_paused",
            provider=rt.name,
            cause=pause.cause,
            since=round(since, 3),
            task=task,
        )
        self._admit.requeue(rt.pool)

    def _after_attempt(self, rt: ProviderRuntime, probe: bool, task: str | None) -> None:
        """After any attempt at `rt`: a probe's turn is handed on, and a pause that ended with an
        answer is said and its waiting requests woken."""
        if probe:
            rt.pauses.probed()
        if rt.pauses.seen is not None and rt.pauses.ended() and not rt.breaker.takeout.out:
            event(_log, INFO, "target_resumed", provider=rt.name, task=task)

    def stop_sending(self) -> None:
        """From now on no request is sent: those waiting for quota or for a retry's backoff give
        up at once (reservations refunded) and fail with `DispatchStopped`; calls already sent
        finish."""
        self._admit.stop()
        self._attempts.stopping = True

    async def _acquire_any(
        self, candidates: list[Candidate], model: str, urgent: bool = False
    ) -> tuple[Candidate, Reservation, bool]:
        """Reserve quota at whichever target still in its route admits the request first. A paused
        target whose probe is due takes this request as its probe (True), even where the route
        has other targets; when every target left is paused and no probe is due, wait for one's
        turn or for its pause to end."""
        while True:
            now = self._clock.now()
            left = [c for c in candidates if not c[0].runtime.breaker.is_out(now)]
            if not left:
                raise _no_target_left(model, candidates)
            ready = [c for c in left if c[0].runtime.breaker.takeout.pause is None]
            if len(ready) < len(left):  # some target is paused
                ready = _probe_turn(left, now) or ready
                if not ready:
                    await self._wait_paused(left)
                    continue
            probe = ready[0][0].runtime.breaker.takeout.pause is not None
            won = None
            try:
                won = await self._admit.acquire_once(ready, urgent)
            finally:
                if probe and (won is None or not _usable(won[0], True, self._clock.now())):
                    ready[0][0].runtime.pauses.probed()
            if won is not None and _usable(won[0], probe, self._clock.now()):
                return won[0], won[1], probe
            if won is not None:  # taken out or paused while the request waited: nothing was sent
                won[0][0].runtime.pool.refund(won[1])

    async def _wait_paused(self, left: list[Candidate]) -> None:
        """Until one of the paused targets `left` may be probed, answers again or is out."""
        if self._admit.stopping:
            raise DispatchStopped()
        futures = {c[0].runtime.pauses.future() for c in left}
        self._admit.acquiring.update(futures)
        try:
            await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._admit.acquiring.difference_update(futures)
        if self._admit.stopping:
            raise DispatchStopped()


def _no_target_left(model: str, candidates: list[Candidate]) -> NoTargetLeft:
    """`RouteStopped` when every target refused its key (that route alone stops), else the job's
    stop, `NoTargetLeft`."""
    outs = [c[0].runtime.breaker.takeout for c in candidates]
    kind = RouteStopped if all(t.key_refused for t in outs if t.out) else NoTargetLeft
    return kind(stop_line(model, [(c[0].runtime.name, c[0].runtime.breaker.takeout) for c in candidates]))


def _probe_turn(left: list[Candidate], now: float) -> list[Candidate]:
    """The first paused target whose probe this request may send now (claimed), or none."""
    for c in left:
        pause = c[0].runtime.breaker.takeout.pause
        if pause is not None and pause.claim(now):
            return [c]
    return []


def _usable(c: Candidate, probe: bool, now: float) -> bool:
    """Whether the target a request won quota at may still be sent to: not out, and not paused
    unless the request is its probe."""
    breaker = c[0].runtime.breaker
    return not breaker.is_out(now) and (probe or breaker.takeout.pause is None)
