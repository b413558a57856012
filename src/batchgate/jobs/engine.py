"""The job engine: claims tasks from the store, runs them through the gateway, group-commits each
outcome, enforces the budget and the error-rate stop, and stops gracefully on request.

Delivery is at-least-once: a task is `running` from its claim until its outcome is committed; after
a crash, `requeue_running` puts such tasks back, so they are sent again. A succeeded task is final
and never sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from batchgate.clock import Clock, LoopClock
from batchgate.config import GatewayConfig
from batchgate.errors import BatchgateError, QuotaExhaustedError, RoutingError
from batchgate.gateway import Gateway
from batchgate.jobs.commit import GroupCommitter
from batchgate.jobs.guards import BudgetGuard, ErrorRateWindow
from batchgate.jobs.output import format_error_line, format_success_line
from batchgate.jobs.output_check import OutputCheck
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.store import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.models import Result, Usage

CLAIM_CHUNK = 512


@dataclass(frozen=True, slots=True)
class EngineOptions:
    concurrency: int | None = None
    max_attempts: int | None = None
    timeout: float | None = None
    grace_seconds: float = 10.0
    window: int | None = None  # tasks alive at once; default 4 x concurrency (>= 1024)


@dataclass(slots=True)
class Progress:
    """Live figures of one run, read by the progress display and the status snapshot."""

    started: float
    total: int
    done_before: int = 0  # terminal tasks from earlier runs
    succeeded: int = 0
    failed: int = 0
    invalid: int = 0
    in_flight: int = 0
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retry_extra_tokens: int = 0
    invalid_ids: list[str] = field(default_factory=list)
    cost_by_provider: dict[str, float] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return self.done_before + self.succeeded + self.failed


@dataclass(frozen=True, slots=True)
class EngineOutcome:
    status: str  # completed | stopped
    stop_reason: str | None
    elapsed_s: float
    statistics: Any  # GatewayStatistics of this run
    progress: Progress
    emulator_stats: dict[str, Any] | None


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
    ) -> None:
        self.config = config
        self.store = store
        self.job_id = job_id
        self.options = options or EngineOptions()
        self.clock = clock or LoopClock()
        self._base_urls = base_urls
        self._on_gateway = on_gateway
        self.prices = PriceTable(config.prices)
        self.budget = BudgetGuard(config.budget)
        self.errors = ErrorRateWindow(config.job.error_rate_threshold, config.job.error_rate_window)
        self.check = OutputCheck(config.job.validate_regex, config.job.validate_schema)
        self.progress = Progress(started=time.time(), total=0)
        self.stop_reason: str | None = None
        self._stop = asyncio.Event()
        self.gateway: Gateway | None = None
        self._estimates: dict[int, tuple[float, int]] = {}  # budget reserved per in-flight seq

    def request_stop(self, reason: str) -> None:
        """Stop dispatching (idempotent; the first reason wins). In-flight work gets a grace period."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def run(self) -> EngineOutcome:
        counts = await self.store.counts(self.job_id)
        self.progress.total = sum(counts.values())
        self.progress.done_before = counts[TaskState.SUCCEEDED] + counts[TaskState.FAILED]
        totals = await self.store.totals(self.job_id)
        self.budget.spent_cost = float(totals.get("cost_usd", 0.0))
        self.budget.spent_tokens = int(totals.get("prompt_tokens", 0) + totals.get("completion_tokens", 0))
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
                await self.store.requeue_running(self.job_id)
            stats = gateway.statistics()
            emu = gateway.emulator.stats() if gateway.emulator is not None else None
        self.gateway = None
        status = "stopped" if self.stop_reason is not None else "completed"
        return EngineOutcome(status, self.stop_reason, self.clock.now() - started, stats, self.progress, emu)

    # -- dispatch ------------------------------------------------------------------------------
    def _window(self, gateway: Gateway) -> int:
        if self.options.window:
            return self.options.window
        conc = self.options.concurrency or self.config.settings.concurrency
        return max(1024, 4 * conc)

    async def _dispatch(self, gateway: Gateway, committer: GroupCommitter) -> None:
        window = self._window(gateway)
        inflight: set[asyncio.Task[None]] = set()
        stop_wait = asyncio.ensure_future(self._stop.wait())
        exhausted = False
        try:
            while not self.stopping:
                if not exhausted and len(inflight) < window:
                    claimed = await self.store.claim_tasks(
                        self.job_id, min(CLAIM_CHUNK, window - len(inflight))
                    )
                    if not claimed:
                        exhausted = True
                    for spec in claimed:
                        if self.stopping or not self._admit_budget(gateway, spec):
                            break  # unclaimed leftovers are requeued when the run ends
                        inflight.add(asyncio.ensure_future(self._run_task(gateway, spec, committer)))
                    if claimed and len(inflight) < window and not self.stopping:
                        continue
                if not inflight:
                    if exhausted:
                        return
                    continue
                done, _ = await asyncio.wait([*inflight, stop_wait], return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is not stop_wait:
                        inflight.discard(task)
                        task.result()  # surfaces programming errors and store failures
            await self._drain(inflight)
        finally:
            stop_wait.cancel()
            for task in inflight:
                task.cancel()
            if inflight:
                await asyncio.gather(*inflight, return_exceptions=True)

    async def _drain(self, inflight: set[asyncio.Task[None]]) -> None:
        """After a stop: give in-flight work a grace period, then cancel what is left."""
        if not inflight:
            return
        done, _ = await asyncio.wait(inflight, timeout=self.options.grace_seconds)
        for task in done:
            inflight.discard(task)
            with contextlib.suppress(asyncio.CancelledError):
                task.result()

    def _admit_budget(self, gateway: Gateway, spec: TaskSpec) -> bool:
        if not self.budget.limited:
            return True
        try:
            est = gateway.estimate(spec.body)
        except RoutingError:
            return True  # the task fails on its own with a routing error
        cost = self.prices.estimate(est.model, est.prompt_tokens, est.max_output_tokens)
        tokens = est.prompt_tokens + est.max_output_tokens
        if not self.budget.admit(cost, tokens):
            self.request_stop(self.budget.reason())
            return False
        self.budget.reserve(cost, tokens)
        self._estimates[spec.seq] = (cost, tokens)
        return True

    # -- one task ------------------------------------------------------------------------------
    async def _run_task(self, gateway: Gateway, spec: TaskSpec, committer: GroupCommitter) -> None:
        self.progress.in_flight += 1
        try:
            result, attempts, invalid = await self._run_with_checks(gateway, spec)
        finally:
            self.progress.in_flight -= 1
        if isinstance(result.error, QuotaExhaustedError):
            # The account is out of quota: every further call would fail the same way. Stop the job
            # and leave this task to be sent again after the user tops up (it stays running →
            # requeued), instead of recording a failure that is not the item's fault.
            self.request_stop(f"provider {result.provider} refused: {result.error.message}")
            self._settle_budget(spec, 0.0, 0)
            return
        committer.add(self._outcome(spec, result, attempts, invalid))
        if self.errors.record(not result.ok or invalid is not None):
            self.request_stop(self.errors.reason())

    async def _run_with_checks(self, gateway: Gateway, spec: TaskSpec) -> tuple[Result, int, str | None]:
        """Run the task; with an output check, re-run an invalid answer up to the job's limit.

        Returns the last result, the provider calls made in all, and the last problem (None if valid).
        """
        rounds = max(1, self.config.job.validation_attempts) if self.check.active else 1
        calls = 0
        problem: str | None = None
        for _ in range(rounds):
            result = await gateway.arun(spec.body, index=spec.seq, custom_id=spec.custom_id)
            calls += len(result.attempts)
            if not result.ok or not self.check.active:
                return result, calls, None
            problem = self.check.problem(result.text)
            if problem is None:
                return result, calls, None
            self._account(result, wasted=True)
        return result, calls, problem

    def _account(self, result: Result, *, wasted: bool) -> float:
        usage = result.usage or Usage()
        cost = self.prices.cost(result.model, usage)
        if wasted:
            self.progress.retry_extra_tokens += usage.total_tokens
        else:
            self.progress.prompt_tokens += usage.prompt_tokens
            self.progress.completion_tokens += usage.completion_tokens
        wasted_tokens = sum(a.tokens_charged for a in result.attempts if a.error_kind is not None)
        self.progress.retry_extra_tokens += wasted_tokens
        self.progress.cost_usd += cost
        if result.provider is not None:
            by = self.progress.cost_by_provider
            by[result.provider] = by.get(result.provider, 0.0) + cost
        return cost

    def _settle_budget(self, spec: TaskSpec, cost: float, tokens: int) -> None:
        est = self._estimates.pop(spec.seq, None)
        if est is not None or self.budget.limited:
            e_cost, e_tokens = est or (0.0, 0)
            self.budget.settle(e_cost, e_tokens, cost, tokens)

    def _outcome(self, spec: TaskSpec, result: Result, attempts: int, invalid: str | None) -> TaskOutcome:
        cost = self._account(result, wasted=False)
        usage = result.usage or Usage()
        self._settle_budget(spec, cost, usage.total_tokens)
        latency = round(result.latency_ms, 1)
        if result.ok and invalid is None:
            self.progress.succeeded += 1
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
            code, message = "invalid_output", invalid
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
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=cost,
        )
