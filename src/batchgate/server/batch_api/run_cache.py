"""The server-wide response cache, one tenant at a time (issue 43): every run of a key gets a
`JobCache` over the server's one store (the config's `cache.store`, which `serve --cache` sets,
opened at the first run and closed with the runs), its keys hashed under the batch's owner, so no
tenant ever reads another's answers (and in-job dedupe stays within one job). A server without a
cache store still dedupes each job's identical lines; the config's store is never opened per job."""

from __future__ import annotations

import asyncio

from batchgate.cache.location import open_cache
from batchgate.cache.protocol import CacheStore
from batchgate.config import GatewayConfig
from batchgate.jobs.cache.cached import JobCache
from batchgate.server.tenancy.registry import BatchRecord


class ServerCache:
    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self._store: CacheStore | None = None
        self._opening = asyncio.Lock()

    async def for_batch(self, batch: BatchRecord | None) -> JobCache:
        """A run's cache: the server's store, keys scoped to the batch's owner."""
        settings = self.config.cache
        async with self._opening:
            if self._store is None and settings.store is not None:
                bound = settings.max_mb << 20
                self._store = await open_cache(settings.store, max_bytes=bound, namespace=settings.namespace)
        scope = f"tenant:{batch.owner if batch is not None else ''}"
        return JobCache(self._store, self.config, mode=settings.mode, scope=scope, dedupe=settings.dedupe)

    async def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            await store.close()
