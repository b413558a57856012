"""The Batch API client factory: the client for a provider's kind, over an aiohttp session (a chat
client, over a `ChatTransport`, is `providers.base.make_chat_client`'s: two seams, two factories,
one way of refusing)."""

from __future__ import annotations

import aiohttp

from batchgate.clock import Clock
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.errors import ConfigError
from batchgate.policy.poll import PollPolicy
from batchgate.providers.base import require_base_url, unknown_kind
from batchgate.providers.batch.anthropic import AnthropicBatchClient
from batchgate.providers.batch.azure import AzureBatchClient
from batchgate.providers.batch.common import BatchClient
from batchgate.providers.batch.gemini import GeminiBatchClient
from batchgate.providers.batch.openai import OpenAIBatchClient


def make_batch_client(
    config: ProviderConfig,
    session: aiohttp.ClientSession,
    timeouts: TimeoutConfig,
    *,
    base_url: str | None = None,
    clock: Clock | None = None,
    poll: PollPolicy | None = None,
) -> BatchClient:
    """The batch client for `config.kind` (as `batchgate.providers.make_chat_client` does for chat)."""
    require_base_url(config, base_url)
    if config.kind == "openai":
        return OpenAIBatchClient(config, session, timeouts, base_url=base_url, clock=clock, poll=poll)
    if config.kind == "azure":
        return AzureBatchClient(config, session, timeouts, base_url=base_url, clock=clock, poll=poll)
    if config.kind == "anthropic":
        return AnthropicBatchClient(config, session, timeouts, base_url=base_url, clock=clock, poll=poll)
    if config.kind == "gemini":
        return GeminiBatchClient(config, session, timeouts, base_url=base_url, clock=clock, poll=poll)
    if config.kind == "bedrock":  # its batch inference reads S3: not supported (live Converse only)
        raise ConfigError("<config>", f"providers.{config.name}.batch_api", "bedrock has no Batch API here")
    raise unknown_kind(config)
