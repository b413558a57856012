"""What a request costs in money: the config's price table (USD per million tokens), then the
built-in one (`price_list`), applied to estimated or real usage, live or at the Batch API
discount; and the check at a job's start that no model the routes send to is counted as free
unseen (a warning, or an error when a money budget could never fire)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.config import GatewayConfig, Price
from batchgate.errors import ConfigError
from batchgate.jobs.price_list import BUILTIN_DATE, builtin_price
from batchgate.models import Usage, requested_output_tokens
from batchgate.tokens import chat_framing

PER = 1_000_000.0
BUILTIN_NOTE = f"price from the built-in table of {BUILTIN_DATE}"


class PriceTable:
    def __init__(self, prices: Mapping[str, Price], *, builtin: bool = True) -> None:
        self._prices = dict(prices)
        self._builtin = builtin

    def price(self, model: str | None) -> Price | None:
        found = self._lookup(model)
        return found[0] if found is not None else None

    def from_builtin(self, model: str | None) -> bool:
        """Whether `model`'s price comes from the built-in table (the config has none for it)."""
        found = self._lookup(model)
        return found is not None and found[1]

    def _lookup(self, model: str | None) -> tuple[Price, bool] | None:
        if model is None:
            return None
        if model in self._prices:
            return self._prices[model], False
        # Providers answer with dated model names ("gpt-4o-mini-2024-07-18"): match the longest prefix.
        best = max((m for m in self._prices if model.startswith(m)), key=len, default=None)
        if best is not None:
            return self._prices[best], False
        entry = builtin_price(model) if self._builtin else None
        return (entry[1], True) if entry is not None else None

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
        return bool(self._prices) or self._builtin


def target_models(config: GatewayConfig) -> list[str]:
    """The models the config's routes send to (a target's own model, else its route's)."""
    return sorted({t.model or r.model for r in config.routes for t in r.targets})


def price_notes(config: GatewayConfig) -> dict[str, str]:
    """For the report: each model the routes send to that is priced by the built-in table."""
    table = PriceTable(config.prices)
    return {m: BUILTIN_NOTE for m in target_models(config) if table.from_builtin(m)}


def check_prices(config: GatewayConfig, allow_unpriced: bool) -> list[str]:
    """The models the routes send to that have no price (each counts as $0: the caller warns); with a
    money budget, which could then never fire, a `ConfigError` unless `allow_unpriced`
    (`--allow-unpriced`, `budget.allow_unpriced: true`, `Job(allow_unpriced=True)`)."""
    unpriced = PriceTable(config.prices).unpriced(target_models(config))
    if (
        unpriced
        and config.budget.max_cost_usd is not None
        and not (allow_unpriced or config.budget.allow_unpriced)
    ):
        raise ConfigError(
            config.source,
            "prices",
            f"no price for {', '.join(unpriced)}, so budget.max_cost_usd could never stop their spend; "
            "add them under prices: (USD per million tokens), or allow it with --allow-unpriced "
            "(budget.allow_unpriced: true in the config)",
        )
    return unpriced


def unpriced_warning(models: list[str], config: GatewayConfig) -> str:
    """The line a run shows at its start for `models` (`check_prices`)."""
    return (
        f"warning: no price for {', '.join(models)}: their spend counts as $0 "
        f"(add them under prices: in {config.source})"
    )
