"""A job's side of the response cache (issue 43): which tasks' answers may be reused, their keys,
the answers found for a whole chunk of tasks at once (`split`: one bulk lookup, the hits' outcomes
built without the scheduler), the answers paid for in this run put back (`remember`, written in
chunks), and the figures the report tells: answers from cache, the money they saved, the identical
lines sent once (`dedupe`, counted by `LiveTasks`).

A hit's OUT line is the answer as first written, `"cached": true` on it, `attempts: 0`, cost 0.
Only succeeded answers are kept; errors never are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

import orjson

from batchgate.cache.entry import CacheEntry
from batchgate.cache.key import CacheMode, cache_key, reusable
from batchgate.cache.location import open_cache
from batchgate.cache.protocol import CacheStore
from batchgate.config import GatewayConfig
from batchgate.gateway_cache import RouteKinds
from batchgate.jobs.cache.cached_line import hit_head, plain_hit_line
from batchgate.jobs.output.files import format_success_line
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.models import Result, Usage
from batchgate.request_fields import TASK_METADATA, task_metadata
from batchgate.text import plural

PUT_CHUNK = 512  # answers written to the cache at once
CACHED = "cached"  # the OUT line's mark of an answer from the cache
FIGURES_BLOB = "cache_figures"  # the job's cache figures over its runs


class CacheSection(TypedDict):
    """The report's `cache` section (and the figures kept in the job store)."""

    hits: int
    saved_usd: float
    deduped: int
    stored: int


@dataclass
class CacheFigures:
    hits: int = 0  # answers from the cache
    saved_usd: float = 0.0  # what those answers cost when they were paid for
    deduped: int = 0  # lines answered by an identical line of the same job (sent once)
    stored: int = 0  # answers this run put in the cache

    def as_dict(self) -> CacheSection:
        return {
            "hits": self.hits,
            "saved_usd": round(self.saved_usd, 6),
            "deduped": self.deduped,
            "stored": self.stored,
        }


class JobCache:
    """One run's cache: `store` (None: no cache across runs, in-job dedupe only), `mode` (which
    requests are reusable), `scope` (a tenant's keys apart from another's), `dedupe` (identical
    lines of the job sent once)."""

    def __init__(
        self,
        store: CacheStore | None,
        config: GatewayConfig,
        *,
        mode: CacheMode = "deterministic",
        scope: str = "",
        dedupe: bool = True,
    ) -> None:
        self.store = store
        self.mode: CacheMode = mode
        self.scope = scope
        self.dedupe = dedupe
        self.figures = CacheFigures()
        self._kinds = RouteKinds(config)
        self._puts: dict[str, bytes] = {}
        self.owned = False  # the run opened the store (and closes it)

    def key_of(self, body: Mapping[str, object]) -> str | None:
        """The task's cache key, or None when its answer may not be reused."""
        if not reusable(body, self.mode):
            return None
        return cache_key(body, self._kinds.kind(body.get("model")), self.scope)

    async def split(
        self, specs: Sequence[TaskSpec]
    ) -> tuple[list[tuple[TaskSpec, TaskOutcome]], list[TaskSpec]]:
        """`(hits, misses)`: each hit with its outcome from the cache, in one bulk lookup."""
        if self.store is None or not specs:
            return [], list(specs)
        key_of = self.key_of
        keys = [key_of(s.body) for s in specs]
        found = await self.store.get_many([k for k in keys if k is not None])
        hits: list[tuple[TaskSpec, TaskOutcome]] = []
        misses: list[TaskSpec] = []
        saved = 0.0
        for spec, key in zip(specs, keys, strict=True):
            data = found.get(key) if key is not None else None
            if data is None:
                misses.append(spec)
                continue
            (prompt, completion, cached, cost, provider), body = hit_head(data)
            line = None if TASK_METADATA in spec.body else plain_hit_line(
                spec.custom_id, body, prompt, completion, cached, provider
            )  # fmt: skip
            if line is None:
                outcome = cached_outcome(spec, CacheEntry.load(data))
            else:  # what `cached_outcome` gives, without the objects between
                outcome = TaskOutcome(spec.seq, TaskState.SUCCEEDED, 0, line, None, provider)
            hits.append((spec, outcome))
            saved += cost
        self.figures.hits += len(hits)
        self.figures.saved_usd += saved
        return hits, misses

    async def lookup(self, spec: TaskSpec, key: str) -> Result | None:
        """One task's answer from the cache (a `Result` marked `cached`), or None."""
        if self.store is None:
            return None
        data = (await self.store.get_many([key])).get(key)
        if data is None:
            return None
        entry = CacheEntry.load(data)
        self.figures.hits += 1
        self.figures.saved_usd += entry.cost_usd
        usage = Usage(entry.prompt_tokens, entry.completion_tokens, entry.cached_tokens)
        return Result(spec.seq, True, entry.body, provider=entry.provider, status_code=200, usage=usage,
                      custom_id=spec.custom_id, cached=True)  # fmt: skip

    def remember(self, spec: TaskSpec, result: Result, cost: float) -> None:
        """Keep a succeeded answer (written with the next chunk, or at `flush`)."""
        if self.store is None or not result.ok or result.body is None:
            return
        key = self.key_of(spec.body)
        if key is None:
            return
        usage = result.usage or Usage()
        entry = CacheEntry.of(
            result.body,
            usage.prompt_tokens,
            usage.completion_tokens,
            cost,
            result.provider,
            usage.cached_tokens,
        )
        self._puts[key] = entry.dump()

    def full(self) -> bool:
        return len(self._puts) >= PUT_CHUNK

    async def flush(self) -> None:
        """Write the answers remembered since the last flush."""
        puts, self._puts = self._puts, {}
        if puts and self.store is not None:
            await self.store.put_many(puts)
            self.figures.stored += len(puts)

    async def close(self) -> None:
        try:
            await self.flush()
        finally:
            if self.store is not None:
                await self.store.close()


def answered_outcome(spec: TaskSpec, result: Result) -> TaskOutcome:
    """The outcome of a task the cache answered one at a time (`JobCache.lookup`)."""
    usage = result.usage or Usage()
    tokens = (usage.prompt_tokens, usage.completion_tokens)
    return cached_outcome(
        spec, CacheEntry.of(result.body or {}, *tokens, 0.0, result.provider, usage.cached_tokens)
    )


def cached_outcome(spec: TaskSpec, entry: CacheEntry) -> TaskOutcome:
    """A hit's outcome: the answer as first written, marked `cached`, no attempt, nothing spent."""
    extra = task_metadata(spec.body) if TASK_METADATA in spec.body else {}
    extra[CACHED] = True
    usage = Usage(entry.prompt_tokens, entry.completion_tokens, entry.cached_tokens)
    line = format_success_line(
        spec.custom_id,
        request_id=None,
        status_code=200,
        body=orjson.Fragment(entry.body_json),  # the answer's bytes as first written
        provider=entry.provider,
        attempts=0,
        latency_ms=0.0,
        usage=usage,
        extra=extra,
    )
    return TaskOutcome(spec.seq, TaskState.SUCCEEDED, 0, line, None, entry.provider)  # no token spent


async def open_job_cache(config: GatewayConfig, given: JobCache | None) -> JobCache | None:
    """The run's cache: `given` (a server's or the library's), else the config's `cache:` (its
    store opened here, closed by `close_job_cache`); None when neither a store nor dedupe is on."""
    if given is not None:
        return given
    settings = config.cache
    if settings.store is None and not settings.dedupe:
        return None
    store = None
    if settings.store is not None:
        store = await open_cache(
            settings.store, max_bytes=settings.max_mb << 20, namespace=settings.namespace
        )
    made = JobCache(store, config, mode=settings.mode, dedupe=settings.dedupe)
    made.owned = True
    return made


async def close_job_cache(cache: JobCache | None) -> None:
    """Write what the run remembered; close the store when the run opened it."""
    if cache is None:
        return
    if cache.owned:
        await cache.close()
    else:
        await cache.flush()


async def cache_section(store: JobStore, job_id: str, cache: JobCache | None) -> CacheSection | None:
    """The report's `cache` section: this run's figures added to the job's earlier ones (kept in
    the job store), or what earlier runs left when this one has no cache (None: never any)."""
    before = await store.get_blob(job_id, FIGURES_BLOB)
    total = CacheFigures(**orjson.loads(before)) if before else None
    if cache is not None:
        await cache.flush()
        now = cache.figures
        total = total or CacheFigures()
        total.hits, total.deduped = total.hits + now.hits, total.deduped + now.deduped
        total.saved_usd, total.stored = total.saved_usd + now.saved_usd, total.stored + now.stored
        cache.figures = CacheFigures()  # counted once, even when the job runs again in this process
        await store.put_blob(job_id, FIGURES_BLOB, orjson.dumps(total.as_dict()))
    return total.as_dict() if total is not None and (total.hits or total.deduped or total.stored) else None


def cache_lines(section: CacheSection | None) -> list[str]:
    """The summary's line for the report's `cache` section (none when it answered nothing)."""
    if not section or not (section["hits"] or section["deduped"]):
        return []
    line = f"{plural(section['hits'], 'answer')} from cache, $0.00 spent, ${section['saved_usd']:.2f} saved"
    if section["deduped"]:
        line += f"; {plural(section['deduped'], 'identical line')} answered by one request"
    return [line]
