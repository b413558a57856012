"""The top-level request fields each emulated wire knows, and the 400 a strict provider answers
for any other (the emulator option `refuse_unknown_fields`, default false).

A field a client drops on the way is invisible to a provider that ignores what it does not know;
one that refuses unknown fields shows every field that arrives. With the option set, a body field
outside its wire's set is answered as the provider answers it:
- OpenAI (and Azure, the same wire): 400 `invalid_request_error`, "Unrecognized request argument
  supplied: NAME", `param` NAME, `code` `unknown_parameter` (the shape `reject_fields` already
  plays; PROTOCOLS.md "Chat requests", error bodies);
- Anthropic: 400 `invalid_request_error`, "NAME: Extra inputs are not permitted" (what the
  Messages API answers an unknown top-level field; PROTOCOLS.md, error bodies).
The sets are the fields of each API's reference: OpenAI "Create chat completion" and "Create a
model response" (platform.openai.com/docs/api-reference), Anthropic "Messages"
(docs.anthropic.com/en/api/messages). Embeddings and completions are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.errors import ConfigError

OPENAI_CHAT = "openai chat"
RESPONSES = "responses"
ANTHROPIC_MESSAGES = "anthropic messages"

WIRE_FIELDS: dict[str, frozenset[str]] = {
    OPENAI_CHAT: frozenset(
        {
            "model", "messages", "audio", "frequency_penalty", "function_call", "functions",
            "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata",
            "modalities", "n", "parallel_tool_calls", "prediction", "presence_penalty",
            "prompt_cache_key", "prompt_cache_retention", "reasoning_effort", "response_format",
            "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
            "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p",
            "user", "verbosity", "web_search_options",
        }
    ),
    RESPONSES: frozenset(
        {
            "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "text",
            "reasoning", "tools", "tool_choice", "parallel_tool_calls", "store", "metadata",
            "previous_response_id", "conversation", "include", "background", "stream",
            "stream_options", "truncation", "user", "service_tier", "prompt", "prompt_cache_key",
            "safety_identifier", "max_tool_calls", "top_logprobs",
        }
    ),
    ANTHROPIC_MESSAGES: frozenset(
        {
            "model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
            "temperature", "top_k", "top_p", "tools", "tool_choice", "thinking", "service_tier",
            "container", "mcp_servers", "context_management",
        }
    ),
}  # fmt: skip
_WIRES = {("openai", "chat"): OPENAI_CHAT, ("openai", "responses"): RESPONSES}


def read_refuse_unknown(entry: Mapping[str, Any], source: str, key: str) -> bool:
    """The provider entry's `refuse_unknown_fields`: true or false (false by default)."""
    value = entry.get("refuse_unknown_fields", False)
    if not isinstance(value, bool):
        raise ConfigError(source, f"{key}.refuse_unknown_fields", "must be true or false")
    return value


def unknown_field(body: Any, family: str, endpoint: str) -> str | None:
    """The first top-level field of `body` its wire does not know (`family`: openai, azure or
    anthropic), or None; `openai_endpoints.parse_for` answers it in the provider's shape."""
    if not isinstance(body, Mapping):
        return None
    if family not in ("openai", "azure", "anthropic"):
        return None  # Gemini's and Bedrock's wires check their own (gemini_api, bedrock_api)
    wire = ANTHROPIC_MESSAGES if family == "anthropic" else _WIRES.get(("openai", endpoint))
    if wire is None:
        return None
    return next((name for name in body if name not in WIRE_FIELDS[wire]), None)


def message(family: str, name: str) -> str:
    """What the provider says of an unknown field `name`."""
    if family == "anthropic":
        return f"{name}: Extra inputs are not permitted"
    return f"Unrecognized request argument supplied: {name}"
