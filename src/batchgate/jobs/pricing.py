"""What a request costs in money: the config's price table (USD per million tokens), then the
built-in one (`BUILTIN_PRICES`, at the end), applied to estimated or real usage, live or at the Batch API
discount; and the check at a job's start that no model the routes send to is counted as free
unseen (a warning, or an error when a money budget could never fire)."""

from __future__ import annotations

from collections.abc import Mapping

from batchgate.config import GatewayConfig, Price
from batchgate.errors import ConfigError
from batchgate.models import Usage, requested_output_tokens
from batchgate.tokens import chat_framing

PER = 1_000_000.0
BUILTIN_DATE = "2025-10-20"  # when the built-in table (`BUILTIN_PRICES`, at the end) was published
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
        self, config: GatewayConfig, body: Mapping[str, object], prompt_tokens: int
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


# -- the built-in table -------------------------------------------------------------------------
# List prices (USD per million tokens, live; the Batch APIs take half) of the common OpenAI,
# Anthropic and Gemini models, as published on `BUILTIN_DATE`. A config's `prices:` overrides any of them; a
# model priced from here is named in the report, since prices change and a contract may differ.


def _p(inp: float, out: float, cached: float) -> Price:
    return Price(input=inp, output=out, cached_input=cached, batch_discount=0.5)


# A name here prices that model and its dated or `-latest` versions (`gpt-4o-2024-08-06`), no other.
BUILTIN_PRICES: dict[str, Price] = {
    # OpenAI (cached_input: a prompt cache hit)
    "gpt-5": _p(1.25, 10.00, 0.125),
    "gpt-5-mini": _p(0.25, 2.00, 0.025),
    "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "gpt-4.1": _p(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-4o": _p(2.50, 10.00, 1.25),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "o3": _p(2.00, 8.00, 0.50),
    "o3-mini": _p(1.10, 4.40, 0.55),
    "o4-mini": _p(1.10, 4.40, 0.275),
    "gpt-3.5-turbo": _p(0.50, 1.50, 0.50),
    "gpt-3.5-turbo-instruct": _p(1.50, 2.00, 1.50),  # legacy /v1/completions
    # OpenAI embeddings: input tokens only
    "text-embedding-3-small": _p(0.02, 0.0, 0.02),
    "text-embedding-3-large": _p(0.13, 0.0, 0.13),
    "text-embedding-ada-002": _p(0.10, 0.0, 0.10),
    # Anthropic (cached_input: a cache read)
    "claude-opus-4-1": _p(15.00, 75.00, 1.50),
    "claude-opus-4": _p(15.00, 75.00, 1.50),
    "claude-sonnet-4-5": _p(3.00, 15.00, 0.30),
    "claude-sonnet-4": _p(3.00, 15.00, 0.30),
    "claude-haiku-4-5": _p(1.00, 5.00, 0.10),
    "claude-3-7-sonnet": _p(3.00, 15.00, 0.30),
    "claude-3-5-sonnet": _p(3.00, 15.00, 0.30),
    "claude-3-5-haiku": _p(0.80, 4.00, 0.08),
    "claude-3-haiku": _p(0.25, 1.25, 0.03),
    "claude-3-opus": _p(15.00, 75.00, 1.50),
    # Google Gemini, prompts up to 200k tokens (https://ai.google.dev/gemini-api/docs/pricing;
    # cached_input: a context-cache hit); batch mode is half price, as for the others
    "gemini-2.5-pro": _p(1.25, 10.00, 0.31),
    "gemini-2.5-flash": _p(0.30, 2.50, 0.075),
    "gemini-2.5-flash-lite": _p(0.10, 0.40, 0.025),
    "gemini-2.0-flash": _p(0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": _p(0.075, 0.30, 0.075),
    "gemini-embedding-001": _p(0.15, 0.0, 0.15),
}


def builtin_price(model: str) -> tuple[str, Price] | None:
    """The table's entry for `model`: its own name, or that name with a date or `-latest` after it."""
    for base in (model, model.removesuffix("-latest"), model.partition("-20")[0]):
        if base in BUILTIN_PRICES:
            return base, BUILTIN_PRICES[base]
    return None
