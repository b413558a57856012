"""Provider adapters: HTTP clients for OpenAI-compatible servers and Anthropic Messages.

Each client sends one OpenAI-shaped chat request, classifies every failure into batchgate's error
types (`classify`), reads rate-limit headers (`ratelimit_headers`) and, for Anthropic, translates
requests and responses (`translate`). `make_chat_client` builds the right one for a provider config.
The Batch API clients are in `providers.batch` (`providers.batch.factory.make_batch_client`).

May import: `config`, `policy`, `tokens`, `trace_hooks` (the traceparent header) and the core
(`models`, `clock`, `errors`). Not `jobs`, `scheduler`, `quota.pool`.
"""

from batchgate.providers.anthropic import AnthropicClient
from batchgate.providers.base import ProviderClient, make_chat_client, make_token_counter
from batchgate.providers.classify import error_for_exception, error_for_response
from batchgate.providers.openai import OpenAIClient
from batchgate.providers.ratelimit_headers import parse_anthropic_rate_limits, parse_openai_rate_limits
from batchgate.providers.translate import anthropic_to_openai, openai_to_anthropic

__all__ = [
    "AnthropicClient",
    "OpenAIClient",
    "ProviderClient",
    "anthropic_to_openai",
    "error_for_exception",
    "error_for_response",
    "make_chat_client",
    "make_token_counter",
    "openai_to_anthropic",
    "parse_anthropic_rate_limits",
    "parse_openai_rate_limits",
]
