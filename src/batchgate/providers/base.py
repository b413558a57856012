"""The seam between the scheduler and the providers: the `ProviderClient` protocol and factories.

A client sends one OpenAI-shaped chat request to its provider and returns an OpenAI-shaped
`ProviderResponse`, or raises a `ProviderError` subclass saying what went wrong. `make_chat_client`
picks the implementation from the provider's `kind`; `make_token_counter` picks how its prompt
tokens are counted before sending.

Two seams, two factories: a chat client (live requests, over a `ChatTransport`) comes from
`make_chat_client`; a Batch API client (files, batches, polling, over an aiohttp session) from
`providers.batch.factory.make_batch_client`. Both refuse the same way a provider they cannot
address (`require_base_url`) or a kind they do not know (`unknown_kind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from batchgate.clock import Clock
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.errors import ConfigError
from batchgate.models import ProviderResponse, RateLimitSnapshot
from batchgate.providers.anthropic import AnthropicClient
from batchgate.providers.azure import AzureClient
from batchgate.providers.bedrock import BedrockClient
from batchgate.providers.gemini import GeminiClient
from batchgate.providers.openai import OpenAIClient
from batchgate.providers.transport import ChatTransport
from batchgate.tokens import CharCounter, EstimatingTokenCounter, ExactTokenCounter, TokenCounter


class ProviderClient(Protocol):
    """Sends chat requests to one provider."""

    name: str
    kind: str

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        """Send an OpenAI Chat Completions `body` for `model`; raises a `ProviderError` on failure."""
        ...

    def rate_limits(self, headers: Mapping[str, str], wall_now: float) -> RateLimitSnapshot:
        """What a response's rate-limit headers said; resets in seconds from `wall_now`."""
        ...


def make_chat_client(
    config: ProviderConfig,
    transport: ChatTransport,
    timeouts: TimeoutConfig,
    *,
    base_url: str | None = None,
    clock: Clock | None = None,
) -> ProviderClient:
    """The chat client for `config.kind`; `base_url` overrides `config.base_url` (e.g. the
    emulator's); `transport`: the one its network settings name (`providers.network.chat_transport`)."""
    require_base_url(config, base_url)
    if config.kind == "openai":
        return OpenAIClient(config, transport, timeouts, base_url=base_url)
    if config.kind == "azure":
        return AzureClient(config, transport, timeouts, base_url=base_url)
    if config.kind == "anthropic":
        return AnthropicClient(config, transport, timeouts, base_url=base_url, clock=clock)
    if config.kind == "gemini":
        return GeminiClient(config, transport, timeouts, base_url=base_url, clock=clock)
    if config.kind == "bedrock":
        return BedrockClient(config, transport, timeouts, base_url=base_url, clock=clock)
    raise unknown_kind(config)


def require_base_url(config: ProviderConfig, base_url: str | None) -> None:
    """Refuse a provider whose `base_url` is `emulator` when no emulator URL was given."""
    if base_url is None and config.emulated:
        raise ConfigError(
            "<config>", f"providers.{config.name}.base_url", "is 'emulator' but no emulator URL was given"
        )


def unknown_kind(config: ProviderConfig) -> ConfigError:
    return ConfigError("<config>", f"providers.{config.name}.kind", f"unknown provider kind {config.kind!r}")


def make_token_counter(config: ProviderConfig, *, source: str = "<config>") -> TokenCounter:
    """How to count `config`'s prompt tokens: its `tokenizer` setting. "auto" counts characters
    (`CharCounter`): what a provider really charges per counted token is learned by its quota
    pool's charge model, so no exact tokenizer is loaded unless one is named."""
    tokenizer = config.tokenizer
    if tokenizer == "auto":
        return CharCounter()
    if tokenizer == "estimate":
        return EstimatingTokenCounter()
    try:
        return ExactTokenCounter.shared(tokenizer).load()  # named explicitly: check it exists now
    except LookupError:
        raise ConfigError(
            source,
            f"providers.{config.name}.tokenizer",
            f"unknown encoding {tokenizer!r} (use auto, estimate or an encoding such as o200k_base)",
        ) from None
