"""The built-in price table: list prices (USD per million tokens, live; the Batch APIs take half)
of the common OpenAI and Anthropic models, as published on `BUILTIN_DATE`. A config's `prices:`
overrides any of them; a model priced from here is named in the report ("price from the
built-in table of DATE"), since prices change and a contract may differ from the list."""

from __future__ import annotations

from batchgate.config import Price

BUILTIN_DATE = "2025-10-20"


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
}


def builtin_price(model: str) -> tuple[str, Price] | None:
    """The table's entry for `model`: its own name, or that name with a date or `-latest` after it."""
    for base in (model, model.removesuffix("-latest"), model.partition("-20")[0]):
        if base in BUILTIN_PRICES:
            return base, BUILTIN_PRICES[base]
    return None
