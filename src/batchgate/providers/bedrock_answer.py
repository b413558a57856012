"""A Converse answer as OpenAI's `chat.completion` (pure): stopReason → finish_reason, toolUse →
tool_calls (the forced tool of a JSON response_format: its input as the content),
reasoningContent → `reasoning_content`, usage with the cache reads and writes counted
as prompt tokens and the reads as `cached_tokens`
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_ResponseSyntax).
The request's way there is `providers.bedrock_translate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

STOP_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


def converse_to_openai(
    resp: Mapping[str, Any], *, model: str, created: int, rid: str, output_tool: str | None = None
) -> dict[str, Any]:
    """The OpenAI `chat.completion` body for a Converse answer (`ValueError` if it is not one).
    `output_tool`: the forced tool of a JSON response_format, whose input is the answer's content."""
    output = resp.get("output")
    message = output.get("message") if isinstance(output, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        raise ValueError("no 'output.message.content' list")
    usage = converse_usage(resp.get("usage"))
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, Mapping):
            raise ValueError("a content block is not an object")
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block.get("toolUse"), Mapping) and block["toolUse"].get("name") == output_tool:
            texts.append(orjson.dumps(block["toolUse"].get("input")).decode())
        elif isinstance(block.get("toolUse"), Mapping):
            use = block["toolUse"]
            arguments = orjson.dumps(use.get("input")).decode()
            function = {"name": use.get("name"), "arguments": arguments}
            calls.append({"id": use.get("toolUseId"), "type": "function", "function": function})
        elif isinstance(block.get("reasoningContent"), Mapping):
            text = block["reasoningContent"].get("reasoningText")
            if isinstance(text, Mapping) and isinstance(text.get("text"), str):
                reasoning.append(text["text"])
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        reply["tool_calls"] = calls
    if reasoning:
        reply["reasoning_content"] = "".join(reasoning)
    stop = resp.get("stopReason")
    finish = STOP_REASONS.get(stop, "stop") if isinstance(stop, str) else None
    if finish == "tool_calls" and not calls:
        finish = "stop"  # the forced output tool answered: the JSON is the content
    choice = {"index": 0, "message": reply, "finish_reason": finish, "logprobs": None}
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage,
    }


def converse_usage(usage: Any) -> dict[str, Any]:
    """Converse's `usage` as OpenAI's: cache reads and writes are prompt tokens too."""
    if not isinstance(usage, Mapping):
        raise ValueError("no 'usage' object")
    counts = {}
    for name in ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens"):
        value = usage.get(name, 0 if name.startswith("cache") else None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"usage.{name} is not a non-negative integer")
        counts[name] = value
    prompt = counts["inputTokens"] + counts["cacheReadInputTokens"] + counts["cacheWriteInputTokens"]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": counts["outputTokens"],
        "total_tokens": prompt + counts["outputTokens"],
        "prompt_tokens_details": {"cached_tokens": counts["cacheReadInputTokens"]},
    }
