"""What a request costs in money: the config's price table (USD per million tokens) applied to
estimated or real usage, live or at the Batch API discount."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.config import GatewayConfig, Price
from batchgate.models import Usage, requested_output_tokens
from batchgate.tokens import chat_framing

PER = 1_000_000.0


class PriceTable:
    def __init__(self, prices: Mapping[str, Price]) -> None:
        self._prices = dict(prices)

    def price(self, model: str | None) -> Price | None:
        if model is None:
            return None
        if model in self._prices:
            return self._prices[model]
        # Providers answer with dated model names ("gpt-4o-mini-2024-07-18"): match the longest prefix.
        best = max((m for m in self._prices if model.startswith(m)), key=len, default=None)
        return self._prices[best] if best is not None else None

    def cost(self, model: str | None, usage: Usage, *, batch: bool = False) -> float:
        p = self.price(model)
        if p is None:
            return 0.0
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = p.cached_input if p.cached_input is not None else p.input
        total = (
            (usage.prompt_tokens - cached) * p.input
            + cached * cached_price
            + usage.completion_tokens * p.output
        ) / PER
        return total * (p.batch_discount if batch else 1.0)

    def estimate(self, model: str | None, prompt_tokens: int, max_output_tokens: int) -> float:
        """Worst case for a request not yet sent: all prompt uncached, every output token used."""
        return self.cost(model, Usage(prompt_tokens=prompt_tokens, completion_tokens=max_output_tokens))

    def worst_case(
        self, config: GatewayConfig, body: Mapping[str, Any], prompt_tokens: int
    ) -> tuple[float, int]:
        """The most one call of `body` can cost (USD, tokens) on any target of its route, for a
        prompt estimated at `prompt_tokens` (what the quota reserves: its text, as the provider's
        limiter charges it) plus the chat framing the provider bills on top.

        A route may fall back to a dearer model; the budget must hold whichever one answers.
        """
        prompt_tokens += chat_framing(body)
        cost, tokens = 0.0, 0
        for route in config.routes:
            if route.model != body.get("model"):
                continue
            for target in route.targets:
                out = requested_output_tokens(body, config.provider(target.provider).default_max_tokens)
                cost = max(cost, self.estimate(target.model or route.model, prompt_tokens, out))
                tokens = max(tokens, prompt_tokens + out)
        return cost, tokens

    def unpriced(self, models: list[str]) -> list[str]:
        """The models (of those given) the price table has no price for: they count as free."""
        return sorted({m for m in models if self.price(m) is None})

    def __bool__(self) -> bool:
        return bool(self._prices)
