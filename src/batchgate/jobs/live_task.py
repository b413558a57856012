"""One claimed task sent live through the gateway: reserve its worst case against the budget, send
it, re-run an answer the output check refuses (up to `validation_attempts`), account what it was
billed, and build the outcome the engine commits (the same OUT line shape as batch results)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from batchgate.config import GatewayConfig
from batchgate.endpoints import EMBEDDINGS, endpoint_of
from batchgate.errors import BatchgateError, RoutingError
from batchgate.gateway import Gateway
from batchgate.jobs.budget_gate import FREE, Amount, BudgetGate
from batchgate.jobs.cache.cached import JobCache, answered_outcome
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.output import outcome
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.report.build import INVALID_CODE
from batchgate.jobs.report.provider_figures import tally_result
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec
from batchgate.models import Result, Usage

_NO_CHECK = OutputCheck()
MAX_TWINS = 100_000  # answers kept for identical lines of the job still to come (oldest let go)


@dataclass(slots=True)
class _Billed:
    """What one task's calls were billed so far: its cost and its tokens."""

    cost: float = 0.0
    tokens: int = 0


class Abandoned(Exception):
    """A task given up because the job is stopping: not committed, so it is requeued."""


class LiveTasks:
    """Runs claimed tasks through one gateway for one run; `sending` holds the asyncio tasks
    between their call's start and end (the engine's grace period waits for those only)."""

    def __init__(
        self,
        config: GatewayConfig,
        gateway: Gateway,
        budget: BudgetGate,
        check: OutputCheck,
        progress: Progress,
        stopping: Callable[[], bool],
    ) -> None:
        self.config = config
        self.gateway = gateway
        self.budget = budget
        self.check = check
        self.progress = progress
        self.prices = PriceTable(config.prices)
        self.sending: set[asyncio.Task[object]] = set()
        self.step_checks: dict[str, OutputCheck] = {}  # a pipeline step's own output check
        self.cache: JobCache | None = None  # the response cache and in-job dedupe (issue 43)
        self._twins: dict[str, asyncio.Future[Result | None]] = {}  # a reusable task's key -> its answer
        self._stopping = stopping

    def worst_case(self, spec: TaskSpec) -> Amount:
        """The most one live call of `spec` can cost (USD, tokens)."""
        if not self.budget.limited:
            return FREE
        try:
            est = self.gateway.estimate(spec.body)
        except RoutingError:
            return FREE  # the task fails on its own with a routing error
        return self.prices.worst_case(self.config, spec.body, est.prompt_tokens)

    async def run(self, spec: TaskSpec) -> tuple[Result, int, str | None, Amount]:
        """Run the task, or (in-job dedupe) take the answer of an identical reusable task of the
        job that is in flight or answered: sent once, its answer written for each (no attempt, no
        cost). A first that fails does not stand for its twins: each then sends itself."""
        cache = self.cache
        key = cache.key_of(spec.body) if cache is not None else None
        if key is None or cache is None:
            return await self._run(spec)
        hit = await cache.lookup(spec, key)  # a task stored without a bulk lookup (a pipeline's step)
        if hit is not None:
            return hit, 0, None, (0.0, 0)
        if not cache.dedupe:
            return await self._run_kept(spec, cache)
        twin = self._twins.get(key)
        if twin is not None:
            answer = await asyncio.shield(twin)
            if answer is not None:
                cache.figures.deduped += 1
                return answer, 0, None, (0.0, 0)
            return await self._run(spec)
        first: asyncio.Future[Result | None] = asyncio.get_running_loop().create_future()
        self._twins[key] = first
        answer = None
        try:
            done = await self._run_kept(spec, cache)
            answer = done[0] if done[0].ok and done[2] is None else None
            return done
        finally:
            first.set_result(answer)
            if answer is None:
                self._twins.pop(key, None)
            elif len(self._twins) > MAX_TWINS:
                self._twins.pop(next(iter(self._twins)))  # the oldest answer is let go

    async def _run_kept(self, spec: TaskSpec, cache: JobCache) -> tuple[Result, int, str | None, Amount]:
        """Run the task and keep a valid answer in the cache."""
        done = await self._run(spec)
        if done[0].ok and done[2] is None:
            cache.remember(spec, done[0], float(done[3][0]))
            if cache.full():
                await cache.flush()
        return done

    async def _run(self, spec: TaskSpec) -> tuple[Result, int, str | None, Amount]:
        """Run the task; with an output check, re-run an invalid answer up to the job's limit.

        Returns the last result, the provider calls made in all, the last problem (None if
        valid) and everything billed. Raises `Abandoned` instead of starting a call once the job
        is stopping or the call would pass the budget.
        """
        check = self.step_checks.get(spec.step or "", self.check)
        if endpoint_of(spec.body) == EMBEDDINGS:
            check = _NO_CHECK  # vectors, not text: the output check has nothing to read
        rounds = max(1, self.config.job.validation_attempts) if check.active else 1
        calls = 0
        billed = _Billed()
        problem: str | None = None
        me = asyncio.current_task()
        assert me is not None
        for round_no in range(rounds):
            reserved = await self.budget.reserve(self.worst_case(spec)) if not self._stopping() else None
            if reserved is None:
                raise Abandoned(spec.custom_id)
            before = (billed.cost, billed.tokens)
            self.sending.add(me)
            self.progress.sending(+1)
            try:
                result = await self.gateway.arun(spec.body, index=spec.seq, custom_id=spec.custom_id)
                self._observe(result, billed)
            finally:
                self.progress.sending(-1)
                self.sending.discard(me)
                self.budget.settle(reserved, (billed.cost - before[0], billed.tokens - before[1]))
            calls += len(result.attempts)
            if not result.ok or not check.active:
                return result, calls, None, (billed.cost, billed.tokens)
            problem = await check.acheck(result.text)  # off the loop, with a time limit
            if problem is None:
                return result, calls, None, (billed.cost, billed.tokens)
            problem = outcome.refused_message(problem, result.text)
            if round_no + 1 < rounds:
                self._count_rejected(result)
        return result, calls, problem, (billed.cost, billed.tokens)

    def _observe(self, result: Result, billed: _Billed) -> None:
        """Account one gateway result: latencies, wasted tokens, and what it was billed."""
        tally_result(self.progress, result)
        for attempt in result.attempts:
            if attempt.error_kind is not None:
                self.progress.charge_retry(attempt.tokens_charged)
        if not result.ok:
            return
        usage = result.usage or Usage()
        cost = self.prices.cost(result.model, usage)
        billed.cost += cost
        billed.tokens += usage.total_tokens
        self.progress.add_cost(result.provider, cost)

    def _count_rejected(self, result: Result) -> None:
        """An answer the output check refused and that will be asked again: billed, not kept."""
        self.progress.count_refused(result.provider, (result.usage or Usage()).total_tokens)

    def outcome(
        self, spec: TaskSpec, result: Result, attempts: int, invalid: str | None, billed: Amount
    ) -> TaskOutcome:
        """The stored outcome: the kept answer's tokens, and every cent the task was billed."""
        cost = float(billed[0])
        latency = round(result.latency_ms, 1)
        if result.cached:  # from the response cache: marked so, nothing spent
            done = answered_outcome(spec, result)
        elif result.ok and invalid is None:
            done = outcome.succeeded(
                spec,
                body=result.body or {},
                usage=result.usage or Usage(),
                cost=cost,
                provider=result.provider,
                attempts=attempts,
                latency_ms=latency,
                status_code=result.status_code or 200,
                request_id=result.request_id,
            )
        else:
            if invalid is not None:
                self.progress.count_invalid(spec.custom_id)
                self._count_rejected(result)  # the last answer is billed but not kept either
                code, message = INVALID_CODE, invalid
            else:
                err = result.error
                code = err.kind if isinstance(err, BatchgateError) else "error"
                message = err.message if isinstance(err, BatchgateError) else "unknown error"
            done = outcome.failed(
                spec,
                code=code,
                message=message,
                status_code=result.status_code,
                provider=result.provider,
                attempts=attempts,
                latency_ms=latency,
                cost=cost,
            )
        self.progress.record(done, spec.step)
        return done
