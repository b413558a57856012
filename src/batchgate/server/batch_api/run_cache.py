"""The server-wide response cache, one tenant at a time (issue 43): every run of a key gets a
`JobCache` over the server's one store, its keys hashed under that key's owner, so no tenant ever
reads another's answers (and in-job dedupe stays within one job). A server without a cache store
still dedupes each job's identical lines; the config's `cache.store` is never opened per job."""

from __future__ import annotations

from batchgate.cache.location import open_cache
from batchgate.cache.protocol import CacheStore
from batchgate.config import GatewayConfig
from batchgate.jobs.io.cached import JobCache
from batchgate.server.batch_api.run_parts import RunParts
from batchgate.server.tenancy.registry import BatchRecord


def tenant_cache(parts: RunParts, batch: BatchRecord | None) -> JobCache:
    """A run's cache: the server's store, keys scoped to the batch's owner."""
    owner = batch.owner if batch is not None else ""
    settings = parts.config.cache
    scope = f"tenant:{owner}"
    return JobCache(parts.cache, parts.config, mode=settings.mode, scope=scope, dedupe=settings.dedupe)


async def open_server_cache(config: GatewayConfig) -> CacheStore | None:
    """The config's `cache.store` (`serve --cache` sets it), opened once for the server."""
    settings = config.cache
    if settings.store is None:
        return None
    return await open_cache(settings.store, max_bytes=settings.max_mb << 20, namespace=settings.namespace)
