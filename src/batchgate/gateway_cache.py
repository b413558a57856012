"""The library's response cache (`Gateway(cache=...)`, issue 43): a reusable request (temperature
0, a seed, or any n=1 request under `cache.mode: always`) is looked up first, and a hit comes back
as a `Result` with `cached=True`, no attempt made; a succeeded answer is kept; errors never are.
`RouteKinds` names who answers a model (its route's first target: provider kind and model), the
part of a key that tells two providers' answers apart (jobs use it too, `jobs/cache/cached.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from batchgate.cache.entry import CacheEntry
from batchgate.cache.key import cache_key, reusable
from batchgate.cache.protocol import CacheStore
from batchgate.config import GatewayConfig
from batchgate.models import Result, Usage


class RouteKinds:
    """`kind(model)`: the provider kind and model of the route's first target, memoised."""

    def __init__(self, config: GatewayConfig) -> None:
        self._config = config
        self._routes = {r.model: r for r in config.routes}
        self._kinds: dict[object, str] = {}

    def kind(self, model: object) -> str:
        kind = self._kinds.get(model)
        if kind is None:
            route = self._routes.get(model) if isinstance(model, str) else None
            if route is None or not route.targets:
                kind = "?"
            else:
                target = route.targets[0]
                kind = f"{self._config.provider(target.provider).kind}:{target.model or model}"
            self._kinds[model] = kind
        return kind


class GatewayCache:
    """A `CacheStore` in front of a gateway's requests; `scope` keeps one user's keys apart."""

    def __init__(self, store: CacheStore, config: GatewayConfig, scope: str = "") -> None:
        self.store = store
        self.mode = config.cache.mode
        self.scope = scope
        self.kinds = RouteKinds(config)
        self.hits = 0
        self.saved_usd = 0.0

    def key_of(self, body: Mapping[str, object]) -> str | None:
        if not reusable(body, self.mode):
            return None
        return cache_key(body, self.kinds.kind(body.get("model")), self.scope)

    async def run(
        self,
        index: int,
        body: Mapping[str, object],
        custom_id: str | None,
        send: Callable[[], Awaitable[Result]],
    ) -> Result:
        key = self.key_of(body)
        if key is None:
            return await send()
        found = (await self.store.get_many([key])).get(key)
        if found is not None:
            entry = CacheEntry.load(found)
            self.hits += 1
            self.saved_usd += entry.cost_usd
            usage = Usage(entry.prompt_tokens, entry.completion_tokens, entry.cached_tokens)
            return Result(
                index, True, entry.body, provider=entry.provider, model=str(body.get("model")),
                status_code=200, usage=usage, custom_id=custom_id, cached=True,
            )  # fmt: skip
        result = await send()
        if result.ok and result.body is not None:
            usage = result.usage or Usage()
            tokens = (usage.prompt_tokens, usage.completion_tokens)
            entry = CacheEntry.of(result.body, *tokens, 0.0, result.provider, usage.cached_tokens)
            await self.store.put_many({key: entry.dump()})
        return result
