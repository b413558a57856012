"""What one cache entry holds: the answer's body, its usage, what it cost when it was paid for,
and who answered. Stored as one line of compact JSON for the figures, a newline, then the body's
JSON as first written — so a hit's OUT line embeds those bytes as they are (`orjson.Fragment`),
never parsing and re-serialising the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class CacheEntry:
    body_json: bytes  # the provider's answer (the OUT line's response body), as JSON
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float  # what it cost when it was paid for: what a hit saves
    provider: str | None
    cached_tokens: int = 0

    @classmethod
    def of(cls, body: dict[str, Any], prompt: int, completion: int, cost: float, provider: str | None,
           cached: int = 0) -> CacheEntry:  # fmt: skip
        return cls(orjson.dumps(body), prompt, completion, cost, provider, cached)

    @property
    def body(self) -> dict[str, Any]:
        parsed: dict[str, Any] = orjson.loads(self.body_json)
        return parsed

    def dump(self) -> bytes:
        head = [self.prompt_tokens, self.completion_tokens, self.cached_tokens, self.cost_usd, self.provider]
        return orjson.dumps(head) + b"\n" + self.body_json  # compact JSON holds no raw newline

    @classmethod
    def load(cls, data: bytes) -> CacheEntry:
        head, _, body = data.partition(b"\n")
        prompt, completion, cached, cost, provider = orjson.loads(head)
        return cls(body, prompt, completion, cost, provider, cached)
