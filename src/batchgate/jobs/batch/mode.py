"""Running a job's tasks through provider Batch APIs instead of live calls, durably.

`BatchModeRunner` groups claimed tasks by the provider and model of their route's batch target and
by endpoint (chat, embeddings, responses, completions: the OpenAI Batch API takes one endpoint per
batch, shared/PROTOCOLS.md), cuts them into batches within the provider's count and size
limits, submits each (waiting out a 429 on the enqueued-token quota), records every handle in the
job store (`batch_ledger`) before anything else, polls all batches at once, and turns their
results into the same OUT lines as live calls (`batch_outcomes`). Expired, cancelled or
transiently failed items go into one new batch, or back to the caller to be sent live when the
deadline is near or they were batched twice already. After a restart, `resume` re-claims and
polls the recorded batches instead of submitting again. The runner commits outcomes itself
(before marking a batch done); its `events` (`BatchEvents`) only observe them, and hear first of
each answer the output check (`check`) refused.

How a job run uses it (one runner per run, sharing the run's aiohttp session):

    await store.requeue_running(job_id)                # as now
    runner = BatchModeRunner(config, store, job_id, session=s, base_urls=urls, clock=clock,
                             deadline=job_deadline(config, job.created_at), events=events)
    await runner.recover()                             # re-claim recorded batches: before any claim
    batch_tasks = await runner.claim_batch_tasks()     # pending tasks of batch-mode routes
    resumed = create_task(runner.resume()); fresh = create_task(runner.submit(batch_tasks))
    ... live dispatch (claim_tasks) as now, plus the TaskSpecs those two return: send them live ...
    at a stop: cancel those two tasks (the batches go on at the provider; the next run resumes
    them), then `requeue_running` as now.   `batchgate cancel JOB`: `await runner.cancel_all()`
    (with the job locked, after `requeue_running` if no run is active), then `requeue_running`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import EllipsisType

import aiohttp

from batchgate.clock import Clock, LoopClock
from batchgate.config import GatewayConfig, ProviderConfig
from batchgate.endpoints import CHAT, endpoint_of
from batchgate.errors import BadRequestError, JobError
from batchgate.jobs.batch.events import BatchEvents, NoEvents
from batchgate.jobs.batch.ledger import BatchLedger, ProviderBatch
from batchgate.jobs.batch.outcomes import (
    BatchContext,
    custom_id_for,
    failed_batch_outcomes,
    failure_outcome,
    sort_results,
)
from batchgate.jobs.batch.policy import TasksEstimate, batch_target, deadline_near, hours_until, resolve_mode
from batchgate.jobs.batch.stats import OpenBatches
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.report.batch_figures import BatchModeStats
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.models import Usage
from batchgate.providers.batch.common import (
    TRANSIENT_ERRORS,
    BatchClient,
    BatchRequest,
)
from batchgate.providers.batch.factory import make_batch_client
from batchgate.request_fields import wire_body

__all__ = ["BatchModeRunner", "BatchModeStats"]

MAX_ROUNDS = 2  # an item is batched at most twice; then it goes live
CREATE_ATTEMPTS = 30  # tries to create one batch through 429s / transient errors before going live


@dataclass(slots=True)
class _Batch:
    record: ProviderBatch
    specs: dict[int, TaskSpec]  # the tasks this run holds (claimed) among the batch's seqs


class BatchModeRunner:
    """Runs one job's batch-mode tasks; see the module docstring for how a run calls it."""

    def __init__(
        self,
        config: GatewayConfig,
        store: JobStore,
        job_id: str,
        *,
        session: aiohttp.ClientSession | Callable[[], aiohttp.ClientSession],
        base_urls: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        prices: PriceTable | None = None,
        deadline: float | None = None,
        check: OutputCheck | None = None,
        events: BatchEvents | None = None,
    ) -> None:
        """`deadline`: wall seconds (see `batch_policy.job_deadline`), None for no deadline.
        `base_urls` overrides providers' URLs (an embedded emulator's). `session` may be a function
        that opens one when a provider's Batch API is first used (a run with no batch opens none)."""
        self.config = config
        self.store = store
        self.job_id = job_id
        self.stats = BatchModeStats()
        self.open = OpenBatches()  # the batches followed now, with their last polled state
        self._session = session
        self._base_urls = dict(base_urls or {})
        self._clock: Clock = clock or LoopClock()
        self._prices = prices or PriceTable(config.prices)
        self._deadline = deadline
        self._check = check
        self.events: BatchEvents = events or NoEvents()
        self._poll = config.job.batch_poll
        self._ledger = BatchLedger(store, job_id)
        self._clients: dict[str, BatchClient] = {}
        self._recovered: list[_Batch] | None = None  # None until `recover` ran
        self._follows: set[asyncio.Future[None]] = set()
        self._active: set[str] = set()  # keys of the batches this runner holds and follows
        self._cancelling = False

    # -- public API ------------------------------------------------------------------------------

    async def recover(self) -> int:
        """Re-claim the tasks of the recorded, unfinished batches (call right after the engine's
        `requeue_running`, before anything else claims tasks); returns how many were claimed.
        Idempotent; `resume` polls them."""
        if self._recovered is not None:
            return sum(len(b.specs) for b in self._recovered)
        recovered: list[_Batch] = []
        for record in await self._ledger.open_records():
            if record.key in self._active:
                continue
            self._client(record.handle.provider)  # refuse a provider the config no longer has
            specs = await self.store.claim_seqs(self.job_id, record.seqs)
            recovered.append(_Batch(record, {s.seq: s for s in specs}))
            self._active.add(record.key)
            self.open.add(
                record.key, record.handle.provider, record.handle.batch_id, len(specs), record.round
            )
            self._event("batch_resumed", record, requests=len(specs))
        self._recovered = recovered
        self.stats.batches_resumed += len(recovered)
        return sum(len(b.specs) for b in recovered)

    async def resume(self) -> list[TaskSpec]:
        """Poll the recorded batches (recovering them first if needed) to the end and commit their
        outcomes; returns the tasks to send live instead."""
        await self.recover()
        batches, self._recovered = self._recovered or [], []
        live: list[TaskSpec] = []
        await self._all([self._follow(b, live) for b in batches])
        return live

    async def claim_batch_tasks(self, *, hours_left: float | EllipsisType | None = ...) -> list[TaskSpec]:
        """Claim every pending task whose route runs in `batch-api` mode (`job.mode`, the route's
        mode, or `auto` decided now); by default `hours_left` is what remains until `deadline`."""
        if isinstance(hours_left, EllipsisType):
            hours_left = hours_until(self._deadline, self._clock.wall())
        routes = {r.model: r for r in self.config.routes}
        by_route: dict[str, list[int]] = {}
        async for record in self.store.iter_results(
            self.job_id, ordered=True, states=[TaskState.PENDING], with_bodies=True
        ):
            model = (record.body or {}).get("model")
            if isinstance(model, str) and model in routes:
                by_route.setdefault(model, []).append(record.seq)
        chosen: list[int] = []
        for model, seqs in by_route.items():
            mode = resolve_mode(routes[model], self.config, TasksEstimate(len(seqs)), hours_left=hours_left)
            if mode == "batch-api":
                chosen.extend(seqs)
        return await self.store.claim_seqs(self.job_id, chosen) if chosen else []

    async def submit(self, tasks: Sequence[TaskSpec]) -> list[TaskSpec]:
        """Run claimed `tasks` through Batch APIs to the end and commit their outcomes; returns
        the tasks to send live instead (no batch target, deadline near, batched twice already).
        A batch holds one endpoint's tasks; a task of another endpoint than chat whose batch
        target is not OpenAI's goes live (Anthropic's batch answers come back as chat)."""
        live: list[TaskSpec] = []
        groups: dict[tuple[str, str, str], list[TaskSpec]] = {}
        routes = {r.model: r for r in self.config.routes}
        for spec in tasks:
            route = routes.get(spec.body.get("model"))  # type: ignore[arg-type]
            target = batch_target(route, self.config) if route is not None else None
            endpoint = endpoint_of(spec.body)
            if target is None or (endpoint != CHAT and not target[0].openai_wire):
                live.append(spec)
            else:
                groups.setdefault((target[0].name, target[1], endpoint), []).append(spec)
        self.stats.sent_live += len(live)
        await self._all([self._run_group(p, m, specs, 1, live) for (p, m, _), specs in groups.items()])
        return live

    async def cancel_all(self) -> None:
        """Cancel every recorded, unfinished batch and commit the partial results; the rest of
        their tasks stay claimed (the caller's `requeue_running` makes them pending again)."""
        self._cancelling = True
        await self.recover()
        for record in await self._ledger.open_records():
            await self._cancel(record)
        batches, self._recovered = self._recovered or [], []
        await self._all([self._follow(b, []) for b in batches])
        while self._follows:  # batches followed by a running `submit` or `resume`
            await asyncio.gather(*list(self._follows), return_exceptions=True)

    # -- submission ------------------------------------------------------------------------------

    def _client(self, name: str) -> BatchClient:
        client = self._clients.get(name)
        if client is None:
            try:
                provider = self.config.provider(name)
            except KeyError:
                raise JobError(
                    f"job {self.job_id!r} has batches at provider {name!r}, which the config no longer names"
                ) from None
            client = self._make_client(provider)
            self._clients[name] = client
        return client

    def _make_client(self, provider: ProviderConfig) -> BatchClient:
        session = self._session if isinstance(self._session, aiohttp.ClientSession) else self._session()
        client: BatchClient = make_batch_client(
            provider,
            session,
            self.config.settings.timeouts,
            base_url=self._base_urls.get(provider.name),
            clock=self._clock,
            poll=self._poll,
        )
        client.max_requests = provider.batch_max_requests or client.max_requests
        client.max_bytes = provider.batch_max_bytes or client.max_bytes
        return client

    async def _run_group(
        self, provider: str, model: str, specs: list[TaskSpec], round_no: int, live: list[TaskSpec]
    ) -> None:
        """Split `specs` (one endpoint's) into batches, create each (one after the other), follow
        them all."""
        client = self._client(provider)
        requests = [BatchRequest(custom_id_for(s.seq), wire_body(s.body)) for s in specs]
        try:
            parts = client.split(requests, model=model)
        except (ValueError, BadRequestError):  # an item too big for any batch, or untranslatable
            self.stats.sent_live += len(specs)
            live.extend(specs)  # sent live, it gets its own answer or error
            return
        by_id = {custom_id_for(s.seq): s for s in specs}
        follows: list[Awaitable[None]] = []
        try:
            for part in parts:
                batch = await self._create(client, model, [by_id[r.custom_id] for r in part], round_no, live)
                if batch is not None:
                    follows.append(self._spawn(self._follow(batch, live)))
        except BaseException:
            await self._all(follows, cancel=True)
            raise
        await self._all(follows)

    async def _create(
        self, client: BatchClient, model: str, specs: list[TaskSpec], round_no: int, live: list[TaskSpec]
    ) -> _Batch | None:
        """Create one batch and record it; None when its tasks went live, failed or were left."""
        requests = [BatchRequest(custom_id_for(s.seq), wire_body(s.body)) for s in specs]
        metadata = {"batchgate_job": self.job_id[:500], "batchgate_round": str(round_no)}
        attempt = 0
        while True:
            if self._cancelling:
                return None  # left claimed: requeued by the caller
            try:
                handle = await client.submit(requests, model=model, metadata=metadata)
                break
            except BadRequestError as exc:  # refused for good (validation): the items fail
                fail = [
                    failure_outcome(s, exc.kind, exc.message, exc.status, client.name, round_no)
                    for s in specs
                ]
                await self._commit(fail, model)
                return None
            except TRANSIENT_ERRORS:  # 429 on the enqueued-token quota, 5xx, transport
                attempt += 1
                self.stats.creation_refused += 1
                if attempt >= CREATE_ATTEMPTS or self._near():
                    self.stats.sent_live += len(specs)
                    live.extend(specs)
                    return None
                await self._clock.sleep(self._poll.interval(attempt - 1))
        record = ProviderBatch(handle, tuple(s.seq for s in specs), model, self._clock.wall(), round_no)
        await self._ledger.add(record)  # first thing after the provider accepted it
        self._active.add(record.key)
        self.stats.batches_submitted += 1
        self.open.add(record.key, record.handle.provider, record.handle.batch_id, len(specs), round_no)
        self._event("batch_submitted", record, requests=len(specs))
        if self._cancel_requested():  # cancel_all ran while this batch was being created
            await self._cancel(record)
        return _Batch(record, {s.seq: s for s in specs})

    async def _cancel(self, record: ProviderBatch) -> None:
        with contextlib.suppress(BadRequestError):  # it has ended already (or is gone)
            await self._client(record.handle.provider).cancel(record.handle)

    # -- results ---------------------------------------------------------------------------------

    async def _follow(self, batch: _Batch, live: list[TaskSpec]) -> None:
        """Poll one batch to its end, commit its items' outcomes, then deal with the leftovers."""
        record = batch.record
        if not batch.specs:  # every task of it finished in an earlier run
            await self._ledger.finish(record, record.ended or "superseded", self._clock.wall())
            self._active.discard(record.key)
            self.open.remove(record.key)
            return
        client = self._client(record.handle.provider)
        ctx = BatchContext(record.handle.provider, record.model, record.round, 0.0)
        try:
            status = await client.poll_until_done(
                record.handle, on_status=lambda s: self.open.update(record.key, s)
            )
            ctx = BatchContext(ctx.provider, ctx.model, ctx.attempts, self._latency_ms(record))
            if status.state == "failed":
                outcomes, leftovers = failed_batch_outcomes(batch.specs, status.raw, ctx)
            else:
                results = await client.results(record.handle)
                outcomes, leftovers, rejected = await asyncio.to_thread(  # the output check, off the loop
                    sort_results, batch.specs, results, ctx, self._prices, self._check
                )
                for refused in rejected:
                    self.events.rejected(refused)
            state: str = status.state
        except BadRequestError:  # the provider no longer knows it (purged, or an emulator restarted)
            state, outcomes, leftovers = "lost", [], [batch.specs[s] for s in sorted(batch.specs)]
        await self._commit(outcomes, record.model)
        await self._ledger.finish(record, state, self._clock.wall())
        self._active.discard(record.key)
        self.open.remove(record.key)
        self.stats.ended(state)
        ok = sum(1 for o in outcomes if o.error is None)
        self._event(
            "batch_ended",
            record,
            state=state,
            succeeded=ok,
            failed=len(outcomes) - ok,
            leftovers=len(leftovers),
        )
        if leftovers and not self._cancelling:
            if record.round >= MAX_ROUNDS or self._near():
                self.stats.sent_live += len(leftovers)
                live.extend(leftovers)
            else:
                self.stats.resubmitted += len(leftovers)
                await self._run_group(record.handle.provider, record.model, leftovers, record.round + 1, live)

    async def _commit(self, outcomes: list[TaskOutcome], model: str) -> None:
        if not outcomes:
            return
        await self.store.complete_tasks(self.job_id, outcomes)
        for outcome in outcomes:
            self.stats.add_outcome(outcome, self._live_cost(outcome, model))
            self.events.outcome(outcome)

    # -- helpers ---------------------------------------------------------------------------------

    def _live_cost(self, outcome: TaskOutcome, model: str) -> float:
        """What an answer bought at the Batch API price would have cost live."""
        price = self._prices.price(model)
        if price is None or not outcome.cost_usd:
            return outcome.cost_usd
        if price.batch_discount > 0:
            return outcome.cost_usd / price.batch_discount
        return self._prices.cost(model, Usage(outcome.prompt_tokens, outcome.completion_tokens))

    def _event(self, name: str, record: ProviderBatch, **fields: object) -> None:
        handle = record.handle
        fields = {"provider": handle.provider, "batch_id": handle.batch_id, "round": record.round, **fields}
        self.events.event(name, fields)

    def _cancel_requested(self) -> bool:
        return self._cancelling

    def _near(self) -> bool:
        return deadline_near(self._deadline, self._clock.wall(), self.config.job.batch_turnaround_hours)

    def _latency_ms(self, record: ProviderBatch) -> float:
        return max(0.0, self._clock.wall() - record.submitted_at) * 1000.0

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Future[None]:
        fut = asyncio.ensure_future(coro)
        self._follows.add(fut)
        fut.add_done_callback(self._follows.discard)
        return fut

    async def _all(self, aws: Sequence[Awaitable[None]], *, cancel: bool = False) -> None:
        """Await all; on the first failure (or a cancellation) cancel the rest, then re-raise."""
        futures = [a if isinstance(a, asyncio.Future) else self._spawn(a) for a in aws]
        try:
            if not cancel:
                await asyncio.gather(*futures)
        finally:
            for fut in futures:
                fut.cancel()
            await asyncio.gather(*futures, return_exceptions=True)
