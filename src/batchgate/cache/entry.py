"""What one cache entry holds: the answer's body, its usage, what it cost when it was paid for,
and who answered; stored as compact JSON bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class CacheEntry:
    body: dict[str, Any]  # the provider's answer, as written in the OUT line's response body
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float  # what it cost when it was paid for: what a hit saves
    provider: str | None
    cached_tokens: int = 0

    def dump(self) -> bytes:
        usage = [self.prompt_tokens, self.completion_tokens, self.cached_tokens]
        return orjson.dumps([self.body, *usage, self.cost_usd, self.provider])

    @classmethod
    def load(cls, data: bytes) -> CacheEntry:
        body, prompt, completion, cached, cost, provider = orjson.loads(data)
        return cls(body, int(prompt), int(completion), float(cost), provider, int(cached))
