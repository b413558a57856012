"""The job engine: claims tasks from the store, runs them through the gateway, group-commits each
outcome, enforces the budget and the error-rate stop, and stops gracefully on request.

Delivery is at-least-once: a task is `running` from its claim until its outcome is committed; after
a crash, `requeue_running` puts such tasks back, so they are sent again. A succeeded task is final
and never sent again. On a stop, dispatch ends at once; in-flight tasks get `grace_seconds` to
finish (a second `interrupt` cuts that short), and whatever did not finish goes back to pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from batchgate.clock import Clock, LoopClock
from batchgate.config import GatewayConfig
from batchgate.errors import BatchgateError, DispatchStopped, QuotaExhaustedError, RoutingError
from batchgate.gateway import Gateway
from batchgate.jobs.commit import GroupCommitter
from batchgate.jobs.guards import BudgetGuard, ErrorRateWindow
from batchgate.jobs.output import format_error_line, format_success_line
from batchgate.jobs.output_check import OutputCheck
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.progress import Progress
from batchgate.jobs.report import INVALID_CODE, hist_add
from batchgate.jobs.store import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.models import Result, Usage

__all__ = ["EngineOptions", "EngineOutcome", "JobEngine", "Progress"]

CLAIM_CHUNK = 512


@dataclass(frozen=True, slots=True)
class EngineOptions:
    concurrency: int | None = None
    max_attempts: int | None = None
    timeout: float | None = None
    grace_seconds: float = 10.0
    window: int | None = None  # tasks alive at once; default 4 x concurrency (>= 1024)


@dataclass(frozen=True, slots=True)
class EngineOutcome:
    status: str  # completed | stopped
    stop_reason: str | None
    elapsed_s: float
    statistics: Any  # GatewayStatistics of this run
    progress: Progress
    emulator_stats: dict[str, Any] | None


class _Abandoned(Exception):
    """A task given up because the job is stopping: not committed, so it is requeued."""


class JobEngine:
    def __init__(
        self,
        config: GatewayConfig,
        store: JobStore,
        job_id: str,
        *,
        options: EngineOptions | None = None,
        clock: Clock | None = None,
        base_urls: dict[str, str] | None = None,
        on_gateway: Callable[[Gateway], None] | None = None,
        spent_extra_tokens: int = 0,
    ) -> None:
        """`spent_extra_tokens`: tokens earlier runs were billed beyond the stored answers (rejected
        answers), counted against the token budget."""
        self.config = config
        self.store = store
        self.job_id = job_id
        self.options = options or EngineOptions()
        self.clock = clock or LoopClock()
        self._base_urls = base_urls
        self._on_gateway = on_gateway
        self._spent_extra_tokens = spent_extra_tokens
        self.prices = PriceTable(config.prices)
        self.budget = BudgetGuard(config.budget)
        self.errors = ErrorRateWindow(config.job.error_rate_threshold, config.job.error_rate_window)
        self.check = OutputCheck(config.job.validate_regex, config.job.validate_schema, source=config.source)
        self.progress = Progress(started=time.time(), total=0)
        self.stop_reason: str | None = None
        self._stop = asyncio.Event()
        self._hurry = asyncio.Event()
        self._wake = asyncio.Event()
        self._inflight: set[asyncio.Task[None]] = set()  # claimed tasks alive in this run
        self._sending: set[asyncio.Task[None]] = set()  # those past the engine's concurrency gate
        self._slots = asyncio.Semaphore(self.options.concurrency or config.settings.concurrency)
        self._failure: BaseException | None = None
        self.gateway: Gateway | None = None
        self._reservations = 0  # budget reservations outstanding
        self._settled: asyncio.Future[None] | None = None  # resolved at the next settlement

    def request_stop(self, reason: str) -> None:
        """Stop dispatching (idempotent; the first reason wins). In-flight work gets a grace period."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()
        self._wake.set()
        if self.gateway is not None:
            self.gateway.stop_sending()  # requests still waiting for quota give up, unsent

    def interrupt(self, reason: str) -> None:
        """A signal: the first stops dispatching, the second also ends the grace period at once."""
        if self.stopping:
            self._hurry.set()
        self.request_stop(reason)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def run(self) -> EngineOutcome:
        counts = await self.store.counts(self.job_id)
        self.progress.total = sum(counts.values())
        self.progress.done_before = counts[TaskState.SUCCEEDED] + counts[TaskState.FAILED]
        totals = await self.store.totals(self.job_id)
        self.budget.spent_cost = float(totals.get("cost_usd", 0.0))
        self.budget.spent_tokens = (
            int(totals.get("prompt_tokens", 0) + totals.get("completion_tokens", 0))
            + self._spent_extra_tokens
        )
        await self.store.requeue_running(self.job_id)
        opts = self.options
        gateway = Gateway(
            self.config,
            clock=self.clock,
            base_urls=self._base_urls,
            concurrency=opts.concurrency,
            max_attempts=opts.max_attempts,
            timeout=opts.timeout,
        )
        committer = GroupCommitter(self.store, self.job_id, self.clock)
        started = self.clock.now()
        async with gateway:
            self.gateway = gateway
            if self._on_gateway is not None:
                self._on_gateway(gateway)
            try:
                await self._dispatch(gateway, committer)
            finally:
                await committer.close()
                await self.store.requeue_running(self.job_id)  # claimed but unfinished -> pending
            stats = gateway.statistics()
            emu = gateway.emulator.stats() if gateway.emulator is not None else None
        self.gateway = None
        status = "stopped" if self.stop_reason is not None else "completed"
        return EngineOutcome(status, self.stop_reason, self.clock.now() - started, stats, self.progress, emu)

    # -- dispatch ------------------------------------------------------------------------------
    def _window(self) -> int:
        if self.options.window:
            return self.options.window
        conc = self.options.concurrency or self.config.settings.concurrency
        return max(1024, 4 * conc)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()  # a store failure or a bug: end the run with it
            self.request_stop("internal error")
        self._wake.set()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def _dispatch(self, gateway: Gateway, committer: GroupCommitter) -> None:
        window = self._window()
        exhausted = False
        try:
            while not self.stopping:
                if not exhausted and len(self._inflight) < window:
                    claimed = await self.store.claim_tasks(
                        self.job_id, min(CLAIM_CHUNK, window - len(self._inflight))
                    )
                    exhausted = not claimed
                    for spec in claimed:
                        task = asyncio.ensure_future(self._run_task(gateway, spec, committer))
                        self._inflight.add(task)
                        task.add_done_callback(self._on_done)
                    if claimed and len(self._inflight) < window:
                        continue  # keep filling the window
                if not self._inflight and exhausted:
                    return
                self._wake.clear()
                if self._inflight and not self.stopping:
                    await self._wake.wait()  # a task finished, or a stop was asked for
                self._raise_failure()
            await self._drain()
            self._raise_failure()
        finally:
            await self._cancel_inflight()

    async def _drain(self) -> None:
        """After a stop: tasks still waiting for a slot were never sent and end at once; those in
        flight get the grace period (cut short by a second `interrupt`)."""
        for task in self._inflight - self._sending:
            task.cancel()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.grace_seconds
        while self._inflight and not self._hurry.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)

    async def _cancel_inflight(self) -> None:
        tasks = list(self._inflight)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._inflight.clear()

    async def _reserve(self, gateway: Gateway, spec: TaskSpec) -> tuple[float, int] | None:
        """Reserve one call's worst case against the budget; None when the job must stop instead.

        When the call does not fit but other calls hold reservations, it waits for them to settle
        (they usually cost less than their worst case); when nothing is outstanding and it still
        does not fit, the budget is spent: the job stops.
        """
        if not self.budget.limited:
            return (0.0, 0)
        try:
            est = gateway.estimate(spec.body)
        except RoutingError:
            return (0.0, 0)  # the task fails on its own with a routing error
        cost, tokens = self.prices.worst_case(self.config, spec.body, est.prompt_tokens)
        while not self.budget.admit(cost, tokens):
            if self._reservations == 0:
                self.request_stop(self.budget.reason())
                return None
            if self._settled is None:
                self._settled = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._settled)
            if self.stopping:
                return None
        self.budget.reserve(cost, tokens)
        self._reservations += 1
        return cost, tokens

    def _settle(self, reserved: tuple[float, int], billed: tuple[float, int]) -> None:
        if not self.budget.limited:
            return
        self.budget.settle(reserved[0], reserved[1], billed[0], billed[1])
        self._reservations -= 1
        waiters, self._settled = self._settled, None
        if waiters is not None and not waiters.done():
            waiters.set_result(None)

    # -- one task ------------------------------------------------------------------------------
    async def _run_task(self, gateway: Gateway, spec: TaskSpec, committer: GroupCommitter) -> None:
        """Run one claimed task and commit its outcome; a task that is given up (stop, budget) or
        cancelled is not committed, so it goes back to pending when the run ends."""
        billed = [0.0, 0]  # everything this task was billed (USD, tokens)
        async with self._slots:
            if self.stopping:
                return
            try:
                result, attempts, invalid = await self._run_with_checks(gateway, spec, billed)
            except _Abandoned:
                return
        if isinstance(result.error, DispatchStopped):
            return  # never sent: left uncommitted, so it is requeued when the run ends
        if isinstance(result.error, QuotaExhaustedError):
            # The account is out of quota: every further call would fail the same way. Stop the job
            # and leave this task uncommitted (requeued when the run ends) to be sent again after
            # the user tops up, instead of recording a failure that is not the item's fault.
            self.request_stop(f"provider {result.provider} refused: {result.error.message}")
            return
        committer.add(self._outcome(spec, result, attempts, invalid, billed))
        if self.errors.record(not result.ok or invalid is not None):
            self.request_stop(self.errors.reason())

    async def _run_with_checks(
        self, gateway: Gateway, spec: TaskSpec, billed: list[Any]
    ) -> tuple[Result, int, str | None]:
        """Run the task; with an output check, re-run an invalid answer up to the job's limit.

        Returns the last result, the provider calls made in all, and the last problem (None if
        valid). Raises `_Abandoned` instead of starting a call once the job is stopping or the
        call would pass the budget.
        """
        rounds = max(1, self.config.job.validation_attempts) if self.check.active else 1
        calls = 0
        problem: str | None = None
        me = asyncio.current_task()
        assert me is not None
        for round_no in range(rounds):
            reserved = await self._reserve(gateway, spec) if not self.stopping else None
            if reserved is None:
                raise _Abandoned(spec.custom_id)
            before = (float(billed[0]), int(billed[1]))
            self._sending.add(me)
            self.progress.in_flight += 1
            try:
                result = await gateway.arun(spec.body, index=spec.seq, custom_id=spec.custom_id)
                self._observe(result, billed)
            finally:
                self.progress.in_flight -= 1
                self._sending.discard(me)
                self._settle(reserved, (billed[0] - before[0], billed[1] - before[1]))
            calls += len(result.attempts)
            if not result.ok or not self.check.active:
                return result, calls, None
            problem = self.check.problem(result.text)
            if problem is None:
                return result, calls, None
            problem = f"{problem} (answer: {(result.text or '')[:200]!r})"
            if round_no + 1 < rounds:
                self._count_rejected(result)
        return result, calls, problem

    def _observe(self, result: Result, billed: list[Any]) -> None:
        """Account one gateway result: latencies, wasted tokens, and what it was billed."""
        for attempt in result.attempts:
            hist_add(self.progress.latency.setdefault(attempt.provider, {}), attempt.latency_ms)
            if attempt.error_kind is not None:
                self.progress.retry_extra_tokens += attempt.tokens_charged
        if not result.ok:
            return
        usage = result.usage or Usage()
        cost = self.prices.cost(result.model, usage)
        billed[0] += cost
        billed[1] += usage.total_tokens
        self.progress.cost_usd += cost
        if result.provider is not None:
            by = self.progress.cost_by_provider
            by[result.provider] = by.get(result.provider, 0.0) + cost

    def _count_rejected(self, result: Result) -> None:
        """An answer the output check refused and that will be asked again: billed, not kept."""
        tokens = (result.usage or Usage()).total_tokens
        self.progress.validation_tokens += tokens
        self.progress.retry_extra_tokens += tokens
        if result.provider is not None:
            by = self.progress.validation_by_provider
            by[result.provider] = by.get(result.provider, 0) + tokens

    def _outcome(
        self, spec: TaskSpec, result: Result, attempts: int, invalid: str | None, billed: list[Any]
    ) -> TaskOutcome:
        """The stored outcome: the kept answer's tokens, and every cent the task was billed."""
        usage = result.usage or Usage()
        cost = float(billed[0])
        latency = round(result.latency_ms, 1)
        if result.ok and invalid is None:
            self.progress.succeeded += 1
            self.progress.prompt_tokens += usage.prompt_tokens
            self.progress.completion_tokens += usage.completion_tokens
            line = format_success_line(
                spec.custom_id,
                request_id=result.request_id,
                status_code=result.status_code or 200,
                body=result.body or {},
                provider=result.provider,
                attempts=attempts,
                latency_ms=latency,
                usage=usage,
            )
            return TaskOutcome(
                seq=spec.seq,
                state=TaskState.SUCCEEDED,
                attempts=attempts,
                output_line=line,
                error=None,
                provider=result.provider,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cost_usd=cost,
            )
        self.progress.failed += 1
        if invalid is not None:
            self.progress.invalid += 1
            if len(self.progress.invalid_ids) < 1000:
                self.progress.invalid_ids.append(spec.custom_id)
            self._count_rejected(result)  # the last answer is billed but not kept either
            code, message = INVALID_CODE, invalid
        else:
            err = result.error
            code = err.kind if isinstance(err, BatchgateError) else "error"
            message = err.message if isinstance(err, BatchgateError) else "unknown error"
        line = format_error_line(
            spec.custom_id,
            status_code=result.status_code,
            code=code,
            message=message,
            provider=result.provider,
            attempts=attempts,
            latency_ms=latency,
        )
        return TaskOutcome(
            seq=spec.seq,
            state=TaskState.FAILED,
            attempts=attempts,
            output_line=line,
            error=f"{code}: {message}"[:500],
            provider=result.provider,
            prompt_tokens=0,
            completion_tokens=0,
            cost_usd=cost,
        )
