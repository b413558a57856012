"""The Redis cache store: one cache for many machines. Values under `<namespace>v:<key>`, read a
chunk at a time with `MGET`; each write also records the key's write time in a sorted set
(`<namespace>written`), which `prune` reads. Bounding its size is the server's part: run it with
`maxmemory` and `maxmemory-policy allkeys-lru` (Redis evicts least recently used keys itself);
`max_bytes` is therefore reported as None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from batchgate.cache.protocol import CacheStats, chunks
from batchgate.clock import wall_time
from batchgate.errors import StoreError
from batchgate.urls import without_password

DEFAULT_NAMESPACE = "batchgate:cache:"
_SCAN = 1000


class RedisCacheStore:
    def __init__(
        self, url: str, namespace: str = DEFAULT_NAMESPACE, *, wall: Callable[[], float] = wall_time
    ) -> None:
        import redis.asyncio as aredis  # noqa: PLC0415 — optional extra (redis)

        self._client: Any = aredis.Redis.from_url(url)
        self._errors: tuple[type[Exception], ...] = (aredis.RedisError,)
        self._url = without_password(url)
        self._ns = namespace
        self._wall = wall

    def _key(self, key: str) -> str:
        return f"{self._ns}v:{key}"

    def _fail(self, exc: Exception) -> StoreError:
        return StoreError(f"{self._url}: cache store error ({type(exc).__name__})")

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        try:
            for part in chunks(keys):
                values = await self._client.mget([self._key(k) for k in part])
                found.update((k, v) for k, v in zip(part, values, strict=True) if v is not None)
        except self._errors as exc:
            raise self._fail(exc) from None
        return found

    async def put_many(self, entries: Mapping[str, bytes]) -> None:
        if not entries:
            return
        now = self._wall()
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.mset({self._key(k): v for k, v in entries.items()})
                pipe.zadd(f"{self._ns}written", dict.fromkeys(entries, now))
                await pipe.execute()
        except self._errors as exc:
            raise self._fail(exc) from None

    async def stats(self) -> CacheStats:
        try:
            n = int(await self._client.zcard(f"{self._ns}written"))
            total = 0
            async for name in self._client.scan_iter(match=f"{self._ns}v:*", count=_SCAN):
                total += int(await self._client.strlen(name))
        except self._errors as exc:
            raise self._fail(exc) from None
        return CacheStats(n, total, None, self._url)

    async def clear(self) -> int:
        return await self._drop("+inf")

    async def prune(self, older_than_s: float) -> int:
        return await self._drop(f"({self._wall() - older_than_s}")

    async def _drop(self, upto: str) -> int:
        dropped = 0
        index = f"{self._ns}written"
        try:
            while keys := await self._client.zrangebyscore(index, "-inf", upto, start=0, num=_SCAN):
                names = [k.decode() for k in keys]
                async with self._client.pipeline(transaction=True) as pipe:
                    pipe.delete(*[self._key(k) for k in names])
                    pipe.zrem(index, *names)
                    await pipe.execute()
                dropped += len(names)
        except self._errors as exc:
            raise self._fail(exc) from None
        return dropped

    async def close(self) -> None:
        await self._client.aclose()
