"""The public library API: a `Gateway` built from a config runs chat requests across providers.

    async with Gateway(config) as gw:
        results = await gw.abatch(requests)          # aligned with the inputs
        async for result in gw.stream(aiter_of_requests, window=4096): ...
        print(gw.statistics())

`gw.batch(requests)` is the same for synchronous callers (it runs its own event loop).
If the config has an `emulator:` section, providers whose base_url is `emulator` are served by an
embedded emulator started and stopped with the gateway — no key and no network needed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import random
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING

from batchgate import gc_tuning
from batchgate.cache.protocol import CacheStore
from batchgate.clock import Clock, LoopClock
from batchgate.config import GatewayConfig, NetworkSettings, ProviderConfig
from batchgate.embedded import provider_urls, start_embedded
from batchgate.endpoints import with_endpoint
from batchgate.gateway_cache import GatewayCache
from batchgate.models import ChatBody, Result
from batchgate.policy.retry import RetryPolicy
from batchgate.providers.base import make_chat_client, make_token_counter
from batchgate.providers.network import DIRECT, chat_transport
from batchgate.providers.transport import ChatTransport
from batchgate.quota.shared import SharedQuota
from batchgate.quota.store.location import StoreSpec, open_store
from batchgate.quota.store.protocol import QuotaStore, quota_id
from batchgate.request_fields import split_request
from batchgate.runtime import ProviderRuntime, build_runtime
from batchgate.scheduler import Scheduler, Target
from batchgate.slots import FairSlots
from batchgate.stats import GatewayStatistics
from batchgate.streamed import Upstreams, events

if TYPE_CHECKING:
    from batchgate.emulator import Emulator
    from batchgate.providers.stream_events import Format, StreamEvent

DEFAULT_WINDOW = 4096


@dataclass(frozen=True, slots=True)
class Estimate:
    provider: str
    model: str
    prompt_tokens: int
    max_output_tokens: int


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        *,
        clock: Clock | None = None,
        base_urls: Mapping[str, str] | None = None,
        concurrency: int | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        quota_store: StoreSpec | QuotaStore | None = None,
        cache: CacheStore | None = None,
    ) -> None:
        """`base_urls` overrides providers' URLs (e.g. an emulator started by the caller);
        `concurrency`, `max_attempts` and `timeout` override the config's settings;
        `quota_store` (a store, or where one is) overrides the config's `quota.store` — by default
        each provider key's quota is this gateway's alone; `cache`: a response cache
        (`batchgate.cache`) reusable requests are answered from and kept in (issue 43)."""
        self.config = config
        self._clock: Clock = clock or LoopClock()
        self._base_urls = dict(base_urls or {})
        self._concurrency = concurrency or config.settings.concurrency
        self._max_attempts = max_attempts or config.settings.retry.max_attempts
        self._timeout = timeout
        self._transports: dict[NetworkSettings, ChatTransport] = {}  # one per distinct network
        self._emulator: Emulator | None = None
        self._urls: dict[str, str] = {}  # the base URLs in use: given, then the embedded emulator's
        self._runtimes: dict[str, ProviderRuntime] = {}
        self._scheduler: Scheduler | None = None
        self._batch_statistics: GatewayStatistics | None = None  # the last synchronous `batch`'s
        self._holds_gc = False
        self._quota_choice = quota_store
        self._quota: QuotaStore | None = None
        self._owns_quota = False
        self._shared: list[SharedQuota] = []
        self._upstreams: Upstreams | None = None  # streamed calls' session (`stream_chat`)
        self.cache = GatewayCache(cache, config) if cache is not None else None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> Gateway:
        if self._scheduler is not None:
            return self
        cfg = self.config
        if any(_shareable(p) for p in cfg.providers):
            self._open_quota()  # before anything that would need closing if it fails
        self._emulator = await start_embedded(cfg)
        self._urls = provider_urls(cfg, self._emulator, self._base_urls)
        timeouts = cfg.settings.timeouts
        if self._timeout is not None:
            timeouts = replace(timeouts, connect=min(timeouts.connect, self._timeout), total=self._timeout)
        seed = cfg.settings.seed if cfg.settings.seed is not None else random.randrange(2**32)
        for p in cfg.providers:
            # the embedded emulator is ours, in-process: reached directly, over the transport chosen
            net = replace(DIRECT, transport=p.network.transport) if p.emulated else p.network
            transport = self._transports.get(net) or self._transports.setdefault(net, chat_transport(net))
            url = self._urls.get(p.name)
            client = make_chat_client(p, transport, timeouts, base_url=url, clock=self._clock)
            self._runtimes[p.name] = build_runtime(
                p,
                client,
                make_token_counter(p),
                self._clock,
                cfg.settings.circuit,
                seed=seed,
                timeout=timeouts.total,
                hedge=timeouts.hedge,
            )
            self._share(p, self._runtimes[p.name])
        routes = {
            r.model: [Target(self._runtimes[t.provider], t.model or r.model) for t in r.targets]
            for r in cfg.routes
        }
        policy = RetryPolicy(
            dataclasses.replace(cfg.settings.retry, max_attempts=self._max_attempts), random.Random(seed)
        )
        self._scheduler = Scheduler(
            routes,
            clock=self._clock,
            retry=policy,
            global_slots=FairSlots(self._concurrency, self._runtimes, self._clock),
        )
        self._holds_gc = gc_tuning.hold(cfg.settings.gc_threshold)
        return self

    def _open_quota(self) -> None:
        """Open the quota store (only when some provider's quota may be shared)."""
        choice = self._quota_choice if self._quota_choice is not None else self.config.quota.store
        if isinstance(choice, StoreSpec):
            self._quota, self._owns_quota = open_store(choice, self._clock), True
        else:
            self._quota, self._owns_quota = choice, False

    def _share(self, p: ProviderConfig, rt: ProviderRuntime) -> None:
        """Share `p`'s quota through the store, unless it has no limit or is this gateway's own
        embedded emulator (whose quota nobody else can use)."""
        if self._quota is None or not _shareable(p):
            return
        key = p.secret.reveal() if p.secret is not None else None  # the key, or a ${VAR} header's
        url = self._urls.get(p.name, p.base_url)
        if p.deployment is not None:  # Azure holds a quota per deployment, not per resource
            url = f"{url}#deployment={p.deployment}"
        quota = quota_id(url, key, _model_scope(self.config, p))
        shared = SharedQuota(self._quota, quota, rt.pool.paces, self._clock)
        rt.pool.share(shared)
        self._shared.append(shared)

    async def _close_quota(self) -> None:
        for shared in self._shared:
            await shared.close()
        self._shared.clear()
        if self._quota is not None and self._owns_quota:
            await self._quota.close()
        self._quota = None

    async def close(self) -> None:
        if self._upstreams is not None:
            await self._upstreams.close()
        await self._close_quota()
        for transport in self._transports.values():
            await transport.close()
        self._transports.clear()
        if self._emulator is not None:
            await self._emulator.__aexit__(None, None, None)
            self._emulator = None
        self._scheduler = None
        if self._holds_gc:
            self._holds_gc = False
            gc_tuning.let_go()

    async def __aenter__(self) -> Gateway:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def emulator(self) -> Emulator | None:
        """The embedded emulator, when the config asked for one (for its counters)."""
        return self._emulator

    @property
    def base_urls(self) -> dict[str, str]:
        """The providers' base URL overrides in use (given ones, then the embedded emulator's)."""
        return dict(self._urls)

    def _sched(self) -> Scheduler:
        if self._scheduler is None:
            raise RuntimeError("the gateway is not started: use `async with Gateway(config)`")
        return self._scheduler

    # -- running requests ------------------------------------------------------------------
    async def arun(
        self, body: ChatBody, *, index: int = 0, custom_id: str | None = None, urgent: bool = False
    ) -> Result:
        """Run one request to completion (success or final error); never raises for the item.

        batchgate's own fields (`custom_id`) are taken off the body and carried on the `Result`;
        a `url` names the endpoint (`/v1/embeddings`, `/v1/responses`, `/v1/completions`; chat
        without one), as in a batch file line.
        `urgent` (a live request beside batch work) waits for quota, in-flight places and slots
        ahead of every non-urgent request, still paced at the provider's rate."""
        own_id, body = split_request(body)
        cid = custom_id if custom_id is not None else own_id
        sched, sent = self._sched(), with_endpoint(body)
        if self.cache is not None:
            return await self.cache.run(index, sent, cid, lambda: sched.run(index, sent, cid, urgent=urgent))
        return await sched.run(index, sent, cid, urgent=urgent)

    async def abatch(self, requests: Sequence[ChatBody]) -> list[Result]:
        """Run all requests; results are aligned with the inputs."""
        results: list[Result | None] = [None] * len(requests)
        async for result in self.stream(requests):
            results[result.index] = result
        return [r for r in results if r is not None]

    def batch(self, requests: Sequence[ChatBody]) -> list[Result]:
        """Synchronous `abatch` (starts and stops the gateway on a fresh event loop).

        Called where an event loop already runs in this thread (a Jupyter cell, say), it runs
        that fresh loop in a worker thread and blocks until it is done.
        """

        async def go() -> list[Result]:
            store = self.cache.store if self.cache is not None else None
            async with Gateway(
                self.config, base_urls=self._base_urls, quota_store=self._quota_choice, cache=store
            ) as gw:
                results = await gw.abatch(requests)
                self._batch_statistics = gw.statistics()
                return results

        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop here: the usual case
            return asyncio.run(go())
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="batchgate-batch") as pool:
            return pool.submit(asyncio.run, go()).result()

    async def stream(
        self,
        requests: Iterable[ChatBody] | AsyncIterable[ChatBody],
        *,
        window: int = DEFAULT_WINDOW,
    ) -> AsyncIterator[Result]:
        """Yield results as they complete, keeping at most `window` requests alive at once.

        Inputs of any size: the iterable is consumed lazily. `Result.index` is the input position;
        a request's `custom_id` is taken off its body and comes back as `Result.custom_id`.
        """
        sched = self._sched()
        source = _aiter(requests)
        done: asyncio.Queue[asyncio.Task[Result]] = asyncio.Queue()
        alive: set[asyncio.Task[Result]] = set()
        index = 0
        exhausted = False
        try:
            while True:
                while not exhausted and len(alive) < window:
                    try:
                        body = await anext(source)
                    except StopAsyncIteration:
                        exhausted = True
                        break
                    custom_id, body = split_request(body)
                    task = asyncio.ensure_future(sched.run(index, with_endpoint(body), custom_id))
                    task.add_done_callback(done.put_nowait)  # O(1) per completion, whatever the window
                    alive.add(task)
                    index += 1
                if not alive:
                    return
                finished = await done.get()
                alive.discard(finished)
                yield finished.result()
        finally:
            for task in alive:
                task.cancel()
            if alive:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.gather(*alive, return_exceptions=True)

    def stream_chat(
        self, body: ChatBody, *, urgent: bool = False, relay: Format | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Run one chat or Responses request streamed: its provider's events as they arrive
        (`batchgate.streamed`: retries and failover only before the first event; the quota held
        at `max_tokens` until the stream ends, settled once from its usage). `relay` (a proxy's):
        events of that format are passed on as they are, so only counted (`.text` and `.tools`
        empty; `.tools`: tool-call pieces, `providers.stream_tools.ToolDelta`)."""
        _, body = split_request(body)
        if self._upstreams is None:
            self._upstreams = Upstreams(self.config.settings.timeouts)
        return events(self._sched(), self._upstreams, with_endpoint(body), urgent=urgent, relay=relay)

    def stop_sending(self) -> None:
        """Send nothing more: requests waiting for quota end at once with `DispatchStopped`
        (nothing sent, nothing charged); requests already sent finish normally."""
        self._sched().stop_sending()

    def estimate(self, body: ChatBody) -> Estimate:
        """Where a request would go first and what it would reserve there (for plans and budgets)."""
        sched = self._sched()
        _, body = split_request(body)
        body = with_endpoint(body)
        model = body.get("model")
        target = sched.targets_for(model if isinstance(model, str) else "")[0]
        cost, prompt = sched.estimate(target, body)
        return Estimate(target.runtime.name, target.model, prompt, cost.output_tokens)

    # -- introspection ---------------------------------------------------------------------
    def _paused_at(self, rt: ProviderRuntime) -> float | None:
        """The wall time `rt` was paused (an outage being waited out), or None."""
        pause = rt.breaker.takeout.pause
        return None if pause is None else self._clock.wall() - (self._clock.now() - pause.since)

    def statistics(self) -> GatewayStatistics:
        """The running gateway's figures; a stopped one's after a synchronous `batch` (which ran
        on a gateway of its own): that batch's."""
        if self._scheduler is None and self._batch_statistics is not None:
            return self._batch_statistics
        sched = self._sched()
        now = self._clock.now()
        return GatewayStatistics(
            providers={
                name: rt.recorder.snapshot(rt.pool.statistics(), rt.breaker.state(now), self._paused_at(rt))
                for name, rt in self._runtimes.items()
            },
            items_succeeded=sched.items_succeeded,
            items_failed=sched.items_failed,
            backing_off=sched.backing_off,
        )

    @property
    def runtimes(self) -> Mapping[str, ProviderRuntime]:
        return self._runtimes

    def __repr__(self) -> str:
        state = "started" if self._scheduler else "stopped"
        return f"Gateway({state}, providers={[p.name for p in self.config.providers]})"


def _model_scope(cfg: GatewayConfig, p: ProviderConfig) -> list[str]:
    """`p`'s quota's model scope (one key, a quota per model): the models its `models:` pool
    holds, else the models routes send to it."""
    if p.models:
        return list(p.models)
    return [t.model or r.model for r in cfg.routes for t in r.targets if t.provider == p.name]


def _shareable(p: ProviderConfig) -> bool:
    """Whether other processes may use `p`'s quota: it has limits and is not an embedded emulator."""
    return not p.emulated and bool(p.limits.declared())


async def _aiter(items: Iterable[ChatBody] | AsyncIterable[ChatBody]) -> AsyncIterator[ChatBody]:
    if isinstance(items, AsyncIterable):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item
