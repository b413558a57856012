"""The Redis quota store: shared buckets and window logs in one hash per quota, changed only by
`apply.lua`.

The script runs atomically on the server and reads the server's clock (`TIME`), so any number of
processes on any number of machines see one bucket and their clocks' skew does not matter. When
Redis cannot be reached, `apply` raises QuotaStoreUnavailable: nothing is sent — batchgate never
falls back to a per-process limit. Needs the `redis` extra (imported only for a redis:// store).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from importlib import resources

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from batchgate.errors import QuotaStoreUnavailable
from batchgate.quota.store.protocol import Pace, Settle, Take
from batchgate.urls import without_password

DEFAULT_NAMESPACE = "batchgate:quota:"
_TTL_MS = 3_600_000  # an idle quota's hash expires after an hour (it would be full again by then)
_CONNECT_TIMEOUT = 3.0
_TIMEOUT = 5.0
_RETRIES = 2


class RedisQuotaStore:
    """See the module docstring."""

    def __init__(self, url: str, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        self.url = url
        self.namespace = namespace
        self._redis = aioredis.Redis.from_url(
            url,
            socket_connect_timeout=_CONNECT_TIMEOUT,
            socket_timeout=_TIMEOUT,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), _RETRIES),  # a blip, not an outage
        )
        source = resources.files("batchgate.quota.store").joinpath("apply.lua").read_text(encoding="utf-8")
        self._script = self._redis.register_script(source)

    async def apply(self, quota: str, paces: Mapping[str, Pace], take: Take | None, settle: Settle) -> float:
        try:
            answer = await self._script(keys=[self.namespace + quota], args=_script_args(paces, take, settle))
        except (RedisError, OSError) as exc:
            raise QuotaStoreUnavailable(
                f"the quota store {self.describe()} is unreachable ({type(exc).__name__}: {exc}); "
                "nothing more is sent — batchgate never falls back to a per-process limit"
            ) from exc
        wait = float(answer.decode() if isinstance(answer, bytes) else answer)
        return wait if not math.isnan(wait) else math.inf

    def describe(self) -> str:
        return without_password(self.url)

    async def close(self) -> None:
        await self._redis.aclose()

    def __repr__(self) -> str:
        return f"RedisQuotaStore({self.describe()!r}, namespace={self.namespace!r})"


def _script_args(paces: Mapping[str, Pace], take: Take | None, settle: Settle) -> list[str | float | int]:
    """`apply.lua`'s ARGV (its header says the layout)."""
    index = {name: i for i, name in enumerate(paces, start=1)}
    entries = [
        (key, index[name], delta)
        for key, deltas in settle.entries.items()
        for name, delta in deltas.items()
        if name in index
    ]
    args: list[str | float | int] = [
        1 if take is not None else 0,
        settle.pause,
        1 if settle.drain else 0,
        _TTL_MS,
        len(paces),
        take.key if take is not None else "",
        take.hold if take is not None else 0.0,
        len(entries),
        len(settle.restamps),
    ]
    for name, pace in paces.items():
        amount = take.amounts.get(name, 0.0) if take is not None else 0.0
        window = pace.window if math.isfinite(pace.window) else -1.0
        args += [name, pace.rate, pace.capacity, pace.top, pace.hold, window, amount]
        args.append(settle.deltas.get(name, 0.0))
    for entry in entries:
        args += entry
    for key, restamp in settle.restamps.items():
        args += [key, restamp.hold]
        args += [restamp.amounts.get(name, 0.0) for name in paces]
    return args
