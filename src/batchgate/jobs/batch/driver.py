"""A job run's batch mode, on the engine's side: starts a `BatchModeRunner` after the gateway (the
gateway's provider URLs; its own HTTP session, opened only when a task goes to a provider's Batch
API, so a run with no batch opens none), recovers recorded batches and claims the tasks of
batch-mode routes before live dispatch begins, follows them in the background, and feeds what
they produce into the run: outcomes into progress, the budget and the error-rate window; tasks
handed back into live dispatch; batch events into the progress sink.

Each batch task reserves its worst case at the Batch API price before it is submitted; tasks that
do not fit the budget go live instead (where the budget stops the run). At a stop the background
work is cancelled (the batches go on at the provider and the next run resumes them) unless the job
is being cancelled, in which case the batches are cancelled at the provider first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine

import aiohttp

from batchgate import trace_hooks
from batchgate.clock import Clock
from batchgate.config import GatewayConfig
from batchgate.errors import ProviderError, RoutingError
from batchgate.gateway import Gateway
from batchgate.jobs.batch.events import RunControl
from batchgate.jobs.batch.mode import BatchModeRunner
from batchgate.jobs.batch.outcomes import Rejected
from batchgate.jobs.batch.policy import batch_target, may_batch
from batchgate.jobs.budget_gate import FREE, Amount, BudgetGate
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.engine_types import Committed, EventSink
from batchgate.jobs.guards import ErrorRateWindow
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.progress.shapes import BatchView
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.models import requested_output_tokens
from batchgate.providers.http import create_session
from batchgate.tokens import chat_framing


class BatchDriver:
    """One run's batch mode. It asks `run` (`RunControl`) to send tasks live, to stop or to fail,
    and is the `BatchEvents` of its `BatchModeRunner`."""

    def __init__(
        self,
        config: GatewayConfig,
        store: JobStore,
        job_id: str,
        *,
        clock: Clock,
        progress: Progress,
        budget: BudgetGate,
        errors: ErrorRateWindow,
        run: RunControl,
        deadline: float | None = None,
        on_event: EventSink | None = None,
        check: OutputCheck | None = None,
        on_commit: Committed | None = None,
    ) -> None:
        self.config = config
        self._on_commit = on_commit
        self.store = store
        self.job_id = job_id
        self.runner: BatchModeRunner | None = None
        self._clock = clock
        self._progress = progress
        self._budget = budget
        self._errors = errors
        self._run = run
        self._deadline = deadline
        self._on_event = on_event
        self._prices = PriceTable(config.prices)
        self._session: aiohttp.ClientSession | None = None
        self.opened_session = False  # whether this run needed a Batch API (and opened its session)
        self._background: set[asyncio.Future[list[TaskSpec]]] = set()
        self._reserved: dict[int, Amount] = {}
        self._check = check
        self._refused_tokens: dict[int, int] = {}  # seq -> tokens of its refused answer

    @property
    def busy(self) -> bool:
        """Batches (or their submission) are still going on: the run must not end yet."""
        return bool(self._background)

    async def start(self, gateway: Gateway) -> None:
        """Recover recorded batches and claim batch-mode tasks (before any live claim), then
        follow and submit them in the background."""
        runner = BatchModeRunner(
            self.config,
            self.store,
            self.job_id,
            session=self._open_session,
            base_urls=gateway.base_urls,
            clock=self._clock,
            prices=self._prices,
            deadline=self._deadline,
            check=self._check,
            events=self,
        )
        self.runner = runner
        self._progress.watch_batches(self.view)
        await runner.recover()
        tasks = await runner.claim_batch_tasks() if may_batch(self.config) else []
        tasks, live = self._reserve(gateway, tasks)
        if live:
            runner.stats.sent_live += len(live)
            self._run.hand_live(live)
        self._spawn(runner.resume())
        if tasks:
            self._spawn(runner.submit(tasks))

    async def cancel_batches(self) -> None:
        """`batchgate cancel`: cancel every batch at the provider and commit partial results."""
        if self.runner is not None:
            await self.runner.cancel_all()

    async def close(self) -> None:
        """Stop following (the batches go on at the provider); the tasks stay claimed until the
        run's final `requeue_running`."""
        pending = list(self._background)
        for fut in pending:
            fut.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self._background.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def view(self) -> BatchView:
        """The open batches and this run's batch counters, for progress and the report."""
        if self.runner is None:
            return {}
        view = self.runner.open.summary()
        view["stats"] = self.runner.stats.to_dict()
        return view

    # -- internals -------------------------------------------------------------------------------

    def _open_session(self) -> aiohttp.ClientSession:
        """The batch clients' HTTP session, opened on the first client's need (closed by `close`)."""
        if self._session is None:
            self.opened_session = True
            self._session = create_session(connect_timeout=self.config.settings.timeouts.connect)
        return self._session

    def _spawn(self, coro: Coroutine[object, None, list[TaskSpec]]) -> None:
        fut: asyncio.Future[list[TaskSpec]] = asyncio.ensure_future(coro)
        self._background.add(fut)
        fut.add_done_callback(self._done)

    def _done(self, fut: asyncio.Future[list[TaskSpec]]) -> None:
        self._background.discard(fut)
        if fut.cancelled():
            self._run.hand_live([])  # wake the dispatcher
            return
        exc = fut.exception()
        if exc is None:
            live = fut.result()
            for spec in live:
                self._budget.settle(self._reserved.pop(spec.seq, FREE), FREE)
            self._run.hand_live(live)
        elif isinstance(exc, ProviderError):  # the provider failed us; the batches are recorded
            self._run.request_stop(
                f"batch mode: {exc.kind} from provider {exc.provider or '?'}: {exc.message}"
            )
            self._run.hand_live([])
        else:
            self._run.fail(exc)

    def _reserve(self, gateway: Gateway, tasks: list[TaskSpec]) -> tuple[list[TaskSpec], list[TaskSpec]]:
        """Reserve each task's worst case at the Batch API price; those that do not fit go live."""
        if not self._budget.limited:
            return tasks, []
        batched: list[TaskSpec] = []
        live: list[TaskSpec] = []
        for spec in tasks:
            amount = self._worst_case(gateway, spec)
            if self._budget.try_reserve(amount):
                self._reserved[spec.seq] = amount
                batched.append(spec)
            else:
                live.append(spec)
        return batched, live

    def _worst_case(self, gateway: Gateway, spec: TaskSpec) -> Amount:
        route = next((r for r in self.config.routes if r.model == spec.body.get("model")), None)
        target = batch_target(route, self.config) if route is not None else None
        if target is None:
            return FREE
        provider, model = target
        try:
            prompt = gateway.estimate(spec.body).prompt_tokens + chat_framing(spec.body)  # as billed
        except RoutingError:
            return FREE
        out = requested_output_tokens(spec.body, provider.default_max_tokens)
        price = self._prices.price(model)
        discount = price.batch_discount if price is not None else 1.0
        return self._prices.estimate(model, prompt, out) * discount, prompt + out

    # -- BatchEvents -----------------------------------------------------------------------------

    def rejected(self, refused: Rejected) -> None:
        """An answer the output check refused: counted invalid; its tokens billed, not kept."""
        self._progress.count_invalid(refused.custom_id)
        self._progress.count_refused(refused.provider, refused.tokens)
        self._refused_tokens[refused.seq] = refused.tokens

    def outcome(self, outcome: TaskOutcome) -> None:
        if self._on_commit is not None:
            self._on_commit((outcome,))
        p = self._progress
        tokens = outcome.prompt_tokens + outcome.completion_tokens + self._refused_tokens.pop(outcome.seq, 0)
        self._budget.settle(self._reserved.pop(outcome.seq, FREE), (outcome.cost_usd, tokens))
        p.record(outcome)
        p.add_cost(outcome.provider or "?", outcome.cost_usd, batch=True)
        failed = outcome.state is not TaskState.SUCCEEDED
        if self._errors.record(failed):
            self._run.request_stop(self._errors.reason())

    def event(self, name: str, fields: dict[str, object]) -> None:
        trace_hooks.batch_event(name, fields)  # a provider batch's span, when tracing is on
        if self._on_event is not None:
            with contextlib.suppress(Exception):  # a display problem never stops the batches
                self._on_event(name, {"job": self.job_id, **fields})
