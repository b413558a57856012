"""The job engine: claims tasks from the store, runs them live through the gateway (`live_task`) or
through provider Batch APIs (`batch_driver`), group-commits each outcome, enforces the budget and
the error-rate stop, and stops gracefully on request.

Delivery is at-least-once: a task is `running` from its claim until its outcome is committed; after
a crash, `requeue_running` puts such tasks back, so they are sent again (a task of a recorded batch
is re-claimed and its batch polled instead). A succeeded task is final and never sent again. The
run ends when no task is left and no batch is outstanding. On a stop, dispatch ends at once;
in-flight calls get `grace_seconds` to finish (a second `interrupt` cuts that short), batches go on
at the provider (or are cancelled there when the job is being cancelled), and whatever did not
finish goes back to pending. A task that fails for good is logged (`task_failed`, with its
custom_id and error kind, never its prompt); every event of the run carries the job id (`logs.bind`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from batchgate.clock import LoopClock
from batchgate.config import GatewayConfig
from batchgate.endpoints import EMBEDDINGS, endpoint_of
from batchgate.errors import DispatchStopped, NoTargetLeft, QuotaExhaustedError, QuotaStoreUnavailable
from batchgate.gateway import Gateway
from batchgate.inflight import InflightLimit
from batchgate.jobs.batch.driver import BatchDriver
from batchgate.jobs.budget_gate import BudgetGate
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.commit import GroupCommitter
from batchgate.jobs.engine_types import EngineHooks, EngineHost, EngineOptions, EngineOutcome, JobFacts
from batchgate.jobs.guards import BudgetGuard, ErrorRateWindow
from batchgate.jobs.live_task import Abandoned, LiveTasks
from batchgate.jobs.output import outcome
from batchgate.jobs.pack.packer import Packer
from batchgate.jobs.progress.counters import Before, Progress
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.logs import bind
from batchgate.stats import GatewayStatistics

__all__ = ["CANCEL_BLOB", "CANCEL_REASON", "JobEngine"]

CLAIM_CHUNK, START_SLICE = 512, 32  # tasks claimed at once; started in one turn of the event loop
CANCEL_BLOB = "cancel_requested"  # written by `batchgate cancel` for the run that holds the job
CANCEL_REASON = "cancelled"
CANCEL_WAIT_S = 120.0  # at most this long cancelling batches at the providers before stopping


class JobEngine:
    no_target = False  # the stop came from a route with no target left (set on the instance)
    routes_stopped = False  # a route stopped alone (`RouteStopped`): its tasks failed, others go on
    _feeding: asyncio.Future[bool] | None = None  # the input still being stored (`feed_from`)
    _on_claim: Callable[[int], None] | None = None

    def __init__(
        self,
        config: GatewayConfig,
        store: JobStore,
        job_id: str,
        options: EngineOptions | None = None,
        *,
        job: JobFacts | None = None,
        hooks: EngineHooks | None = None,
        host: EngineHost | None = None,
    ) -> None:
        """Runs `job_id` of `store` under `config` with `options`; `job`: what it knows of the job
        beyond them, `hooks`: who hears what the run does, `host`: where it runs (clock, a shared
        gateway); see `jobs.engine_types`."""
        self.config = config
        self.store = store
        self.job_id = job_id
        self.options = options or EngineOptions()
        self.job = job or JobFacts()
        self.hooks = hooks or EngineHooks()
        host = host or EngineHost()
        self.clock = host.clock or LoopClock()
        self._base_urls = host.base_urls
        gateway = self._shared = host.gateway
        self._more = False  # follow-up tasks were stored since the last claim found none
        self.budget = BudgetGuard(config.budget)
        self.errors = ErrorRateWindow(config.job.error_rate_threshold, config.job.error_rate_window)
        self.check = OutputCheck(config.job.validate_regex, config.job.validate_schema, source=config.source)
        self.progress = Progress(started=self.clock.wall(), total=0, shared_gateway=gateway is not None)
        self.stop_reason: str | None = None
        self.cancel_requested = False
        self._stop = asyncio.Event()
        self._hurry = asyncio.Event()
        self._wake = asyncio.Event()
        self._inflight: set[asyncio.Task[None]] = set()  # claimed tasks alive in this run
        self._handed: list[TaskSpec] = []  # claimed tasks batch mode handed back to send live
        self._slots = InflightLimit(self.options.concurrency or config.settings.concurrency)
        self._failure: BaseException | None = None
        self._gate = BudgetGate(self.budget, self.request_stop, lambda: self.stopping)
        self._live: LiveTasks | None = None
        self.gateway: Gateway | None = None
        self.last_statistics: GatewayStatistics | None = None  # the gateway's, once the run ended
        self.batches: BatchDriver | None = None

    def request_stop(self, reason: str) -> None:
        """Stop dispatching (idempotent; the first reason wins). In-flight work gets a grace period."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()
        self._wake.set()
        if self.gateway is not None and self._shared is None:
            self.gateway.stop_sending()  # requests still waiting for quota give up, unsent

    def request_cancel(self) -> None:
        """`batchgate cancel`: stop, and cancel the job's provider batches (keeping partial results)."""
        self.cancel_requested = True
        self.stop_reason = CANCEL_REASON
        self.request_stop(CANCEL_REASON)

    def interrupt(self, reason: str) -> None:
        """A signal: the first stops dispatching, the second also ends the grace period at once."""
        if self.stopping:
            self._hurry.set()
        self.request_stop(reason)

    def set_concurrency(self, limit: int) -> None:
        """How many of this job's tasks may be in flight (or waiting for quota) at once, from now
        on (`batchgate serve` shares the gateway between jobs by priority); a lower limit takes
        effect as tasks end."""
        self._slots.set_limit(max(1, limit))

    def feed_from(self, feeding: asyncio.Future[bool], on_claim: Callable[[int], None]) -> None:
        """The input is still being stored (`io.ingest`): the run does not end before `feeding`
        does, each stored chunk (`tasks_arrived`) is claimed as it comes, and `on_claim(upto)`
        hears that the tasks before seq `upto` were claimed (so reading stays just ahead)."""
        self._feeding, self._on_claim = feeding, on_claim
        feeding.add_done_callback(self._fed)

    def _fed(self, feeding: asyncio.Future[bool]) -> None:
        if not feeding.cancelled() and feeding.exception() is not None:
            self.fail(feeding.exception())  # type: ignore[arg-type]
        self._wake.set()

    def tasks_arrived(self, total: int) -> None:
        """More tasks were stored; the job holds `total` so far."""
        self.progress.total = max(self.progress.total, total)
        self._more = True
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def _read_before(self) -> None:
        """What earlier runs of the job left: counted in the progress and spent from the budget."""
        counts = await self.store.counts(self.job_id)
        ok, failed = counts[TaskState.SUCCEEDED], counts[TaskState.FAILED]
        totals = await self.store.totals(self.job_id)
        prompt, completion = int(totals.get("prompt_tokens", 0)), int(totals.get("completion_tokens", 0))
        self.progress.begin(sum(counts.values()), Before(ok, failed, prompt, completion))
        self.budget.spent_cost = float(totals.get("cost_usd", 0.0))
        self.budget.spent_tokens = prompt + completion + self.job.spent_extra_tokens

    async def run(self) -> EngineOutcome:
        bind(job=self.job_id)
        await self._read_before()
        await self.store.requeue_running(self.job_id)
        opts = self.options
        gateway = self._shared or Gateway(
            self.config,
            clock=self.clock,
            base_urls=self._base_urls,
            concurrency=opts.concurrency,
            max_attempts=opts.max_attempts,
            timeout=opts.timeout,
            quota_store=opts.quota_store,
        )
        committer = GroupCommitter(self.store, self.job_id, self.clock, after=self.hooks.on_commit)
        started = self.clock.now()
        async with contextlib.nullcontext(gateway) if self._shared is not None else gateway:
            self.gateway = gateway
            self._live = LiveTasks(
                self.config, gateway, self._gate, self.check, self.progress, lambda: self.stopping
            )
            self._live.step_checks, self._live.cache = dict(self.job.step_checks), self.job.cache
            self._packs = Packer(
                self.config,
                self._live,
                self._slots,
                inputs=self._window() // 2,
                stopping=lambda: self.stopping,
            )
            self.batches = BatchDriver(
                self.config,
                self.store,
                self.job_id,
                clock=self.clock,
                progress=self.progress,
                budget=self._gate,
                errors=self.errors,
                run=self,
                deadline=self.job.deadline,
                on_event=self.hooks.on_event,
                check=self.check,
                on_commit=self.hooks.on_commit,
            )
            try:
                await self.batches.start(gateway)
                await self._dispatch(gateway, committer)
            finally:
                try:
                    await self._stop_batches()
                finally:
                    await committer.close()
                    await self.store.requeue_running(self.job_id)  # claimed but unfinished -> pending
            stats = self.last_statistics = gateway.statistics()
            emu = gateway.emulator.stats() if gateway.emulator is not None else None
        self.gateway = None
        status = "stopped" if self.stop_reason is not None else "completed"
        elapsed = self.clock.now() - started
        ends = (self.no_target, self.routes_stopped)
        return EngineOutcome(status, self.stop_reason, elapsed, stats, self.progress, emu, *ends)

    async def cancel_asked(self) -> bool:
        """Whether `batchgate cancel` asked (through the store) for this job to be cancelled."""
        return bool(await self.store.get_blob(self.job_id, CANCEL_BLOB))

    # -- dispatch ------------------------------------------------------------------------------
    def _window(self) -> int:
        if self.options.window:
            return self.options.window
        conc = self.options.concurrency or self.config.settings.concurrency
        return max(1024, 4 * conc)

    def hand_live(self, specs: list[TaskSpec]) -> None:
        self._handed.extend(specs)
        self._wake.set()

    def fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc  # a store failure or a bug: end the run with it
            self.request_stop("internal error")

    def _on_done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.fail(task.exception())  # type: ignore[arg-type]
        self._wake.set()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _start(self, gateway: Gateway, spec: TaskSpec, committer: GroupCommitter) -> None:
        task = asyncio.ensure_future(self._run_task(gateway, spec, committer))
        self._inflight.add(task)
        task.add_done_callback(self._on_done)

    async def _start_all(self, gateway: Gateway, specs: list[TaskSpec], committer: GroupCommitter) -> None:
        """Start `specs`, `START_SLICE` a loop turn (a chunk's first steps at once hold the loop)."""
        for i, spec in enumerate(specs):
            if i and i % START_SLICE == 0:
                await asyncio.sleep(0)
            self._start(gateway, spec, committer)

    async def _dispatch(self, gateway: Gateway, committer: GroupCommitter) -> None:
        self.progress.expect_steps(self.job.follow.step_sizes() if self.job.follow is not None else {})  # ETA
        window = self._window()
        exhausted = False
        batches = self.batches
        assert batches is not None
        try:
            while not self.stopping:
                if self._more:
                    exhausted, self._more = False, False
                handed, self._handed = self._handed, []
                await self._start_all(gateway, handed, committer)
                if not exhausted and len(self._inflight) < window:
                    claimed = await self.store.claim_tasks(
                        self.job_id, min(CLAIM_CHUNK, window - len(self._inflight))
                    )
                    exhausted = not claimed
                    if claimed and self._on_claim is not None:
                        self._on_claim(claimed[-1].seq + 1)
                    await self._start_all(gateway, claimed, committer)
                    if claimed and len(self._inflight) < window:
                        continue  # keep filling the window
                self._packs.flush_soon()  # what was claimed is started: held embedding lines go
                feeding = self._more or (self._feeding is not None and not self._feeding.done())
                if not self._inflight and exhausted and not self._handed and not batches.busy and not feeding:
                    return
                self._wake.clear()
                waiting = self._inflight or batches.busy or feeding
                if waiting and not self._handed and not self._more and not self.stopping:
                    await self._wake.wait()  # a task finished, batches handed work back, or a stop
                self._raise_failure()
            await self._drain()
            self._raise_failure()
        finally:
            await self._cancel_inflight()
            await self._packs.close()

    async def _drain(self) -> None:
        """After a stop: tasks still waiting for a slot were never sent and end at once; those in
        flight get the grace period (cut short by a second `interrupt`)."""
        sending = self._live.sending if self._live is not None else set()
        for task in self._inflight - sending:
            task.cancel()
        deadline = self.clock.now() + self.options.grace_seconds
        timer = self.clock.call_at(deadline, self._wake.set)  # the grace period's end wakes us too
        try:
            while self._inflight and not self._hurry.is_set() and self.clock.now() < deadline:
                self._wake.clear()
                await self._wake.wait()
        finally:
            timer.cancel()

    async def _stop_batches(self) -> None:
        """At the end of a run: when the job is being cancelled, cancel its batches at the
        providers first (bounded); then stop following them."""
        batches = self.batches
        if batches is None:
            return
        try:
            if self.stopping and (self.cancel_requested or await self.cancel_asked()):
                self.cancel_requested = True
                self.stop_reason = CANCEL_REASON
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(batches.cancel_batches(), CANCEL_WAIT_S)
        finally:
            await batches.close()

    async def _cancel_inflight(self) -> None:
        tasks = list(self._inflight)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._inflight.clear()

    # -- one task ------------------------------------------------------------------------------
    async def _run_task(self, gateway: Gateway, spec: TaskSpec, committer: GroupCommitter) -> None:
        """Run one claimed task and commit its outcome; a task that is given up (stop, budget) or
        cancelled is not committed, so it goes back to pending when the run ends."""
        live = self._live
        assert live is not None
        key = self._packs.key(spec) if endpoint_of(spec.body) == EMBEDDINGS else None  # chat: never packed
        try:
            if key is not None:  # a single-text embedding line: sent in a pack (one slot a pack)
                result, attempts, invalid, billed = await self._packs.run(spec, key)
            else:
                async with self._slots:
                    if self.stopping:
                        return
                    result, attempts, invalid, billed = await live.run(spec)
        except Abandoned:
            return
        if isinstance(result.error, DispatchStopped):
            return  # never sent: left uncommitted, so it is requeued when the run ends
        if isinstance(result.error, QuotaExhaustedError):
            # The account is out of quota: every further call would fail the same way. Stop the job
            # and leave this task uncommitted (requeued when the run ends) to be sent again after
            # the user tops up, instead of recording a failure that is not the item's fault.
            self.request_stop(f"provider {result.provider} refused: {result.error.message}")
            return
        route_only = isinstance(result.error, NoTargetLeft) and result.error.route_only  # the task fails
        self.routes_stopped |= route_only
        if isinstance(result.error, NoTargetLeft | QuotaStoreUnavailable) and not route_only:  # pending
            # no target left (key refused, unreachable), or the quota store is gone
            self.no_target |= self.stop_reason is None and isinstance(result.error, NoTargetLeft)
            self.request_stop(result.error.message)
            return
        done = live.outcome(spec, result, attempts, invalid, billed)
        committer.add(done)
        if done.state is TaskState.FAILED:
            code = (done.error or "").split(":", 1)[0]
            status, provider = result.status_code, result.provider
            outcome.log_failed(spec, code=code, status=status, provider=provider, attempts=attempts)
        if not route_only and self.errors.record(not result.ok or invalid is not None):
            self.request_stop(self.errors.reason())
        if self.job.follow is not None:
            await self._add_follow_ups(spec, done, committer)
        if self.hooks.on_result is not None:
            self.hooks.on_result(spec, done)

    async def _add_follow_ups(self, spec: TaskSpec, done: TaskOutcome, committer: GroupCommitter) -> None:
        """Store the tasks `done` makes ready, after `done` itself is durable (a crash in between is
        mended by the graph's `recover` on resume); the dispatch loop claims them next."""
        assert self.job.follow is not None
        new = self.job.follow.after(spec, done)
        if not new:
            return
        await committer.flush()
        added = await self.store.add_tasks(self.job_id, new)
        self.progress.grow(added)
        self._more = True
