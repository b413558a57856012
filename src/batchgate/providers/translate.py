"""OpenAI Chat Completions ⇄ Anthropic Messages, both ways (pure functions, no I/O).

Requests enter batchgate in the OpenAI shape; `openai_to_anthropic` builds the Messages body:

- `system` and `developer` messages move to the top-level `system` field, joined by blank lines;
- the rest must alternate user/assistant starting with user: consecutive messages of one role are
  merged into one message of text blocks (nothing fake is inserted); a conversation that starts
  with an assistant message is refused;
- text parts become text blocks, `image_url` parts become image blocks (data URLs as base64);
- `max_completion_tokens` (or `max_tokens`, or the provider's default) becomes `max_tokens`;
  `temperature`, `top_p` pass through; `stop` (a string or a list) becomes `stop_sequences`;
  `user` becomes `metadata.user_id`; `n` above 1, streaming, tools and `tool` messages are refused.
  Other OpenAI-only fields (seed, penalties, logprobs, ...) are dropped.

`anthropic_to_openai` turns a Messages response into a `chat.completion` body whose usage counts
cache reads and writes as prompt tokens and reports cache reads as `cached_tokens`.
Refusals raise `BadRequestError`; a response that is not a Messages response raises `ValueError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from batchgate.endpoints import CHAT, PATHS, endpoint_of
from batchgate.errors import BadRequestError

FINISH_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_SYSTEM_ROLES = frozenset({"system", "developer"})
_CHAT_ROLES = frozenset({"user", "assistant"})
_UNSUPPORTED = ("tools", "tool_choice", "functions", "function_call")

_Refuse = Callable[[str], BadRequestError]


def openai_to_anthropic(
    body: Mapping[str, Any], *, model: str, default_max_tokens: int, provider: str = ""
) -> dict[str, Any]:
    """The Anthropic Messages body for an OpenAI Chat Completions body."""

    def refuse(reason: str) -> BadRequestError:
        where = f"{provider}: " if provider else ""
        return BadRequestError(f"{where}cannot translate to Anthropic Messages: {reason}", provider=provider)

    endpoint = endpoint_of(body)
    if endpoint != CHAT:
        raise refuse(f"url {PATHS[endpoint]} is not served by Anthropic (chat and Responses are translated)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise refuse("'messages' must be a non-empty list")
    for name in _UNSUPPORTED:
        if body.get(name) is not None:
            raise refuse(f"'{name}' is not supported")
    if body.get("stream"):
        raise refuse("streaming is not supported")
    n = body.get("n")
    if n is not None and n != 1:
        raise refuse(f"n={n!r} is not supported (Anthropic returns one choice)")

    system, turns = _turns(messages, refuse)

    out: dict[str, Any] = {"model": model, "max_tokens": _max_tokens(body, default_max_tokens, refuse)}
    if system:
        out["system"] = "\n\n".join(system)
    out["messages"] = turns
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None:
            out[name] = value
    stop = _stop_sequences(body.get("stop"), refuse)
    if stop:
        out["stop_sequences"] = stop
    user = body.get("user")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    return out


def _turns(messages: list[Any], refuse: _Refuse) -> tuple[list[str], list[dict[str, Any]]]:
    """The system texts and the alternating user/assistant turns (same-role neighbours merged)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise refuse(f"messages[{i}] must be an object")
        role = message.get("role")
        content = message.get("content")
        if role in _SYSTEM_ROLES:
            system.append(_plain_text(content, i, refuse))
            continue
        if role not in _CHAT_ROLES:
            raise refuse(f"messages[{i}].role {role!r} is not supported")
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]
            previous["content"] = _as_blocks(previous["content"]) + _blocks(content, i, refuse)
            continue
        if not turns and role != "user":
            raise refuse("the first non-system message must come from the user")
        turns.append({"role": role, "content": _content(content, i, refuse)})
    if not turns:
        raise refuse("there is no user message")
    return system, turns


def _stop_sequences(stop: Any, refuse: _Refuse) -> list[str]:
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and stop:
        if not all(isinstance(s, str) for s in stop):
            raise refuse("'stop' must be a string or a list of strings")
        return list(stop)
    if stop is not None and stop != []:
        raise refuse("'stop' must be a string or a list of strings")
    return []


def _max_tokens(body: Mapping[str, Any], default: int, refuse: _Refuse) -> int:
    value = body.get("max_completion_tokens")
    if value is None:
        value = body.get("max_tokens")
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise refuse(f"max_tokens must be a positive integer, got {value!r}")
    return value


def _content(content: Any, i: int, refuse: _Refuse) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return _blocks(content, i, refuse)


def _as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _blocks(content: Any, i: int, refuse: _Refuse) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise refuse(f"messages[{i}].content must be a string or a list of parts")
    blocks: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, str):
            blocks.append({"type": "text", "text": part})
            continue
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            blocks.append(_image_block(part.get("image_url"), i, refuse))
        else:
            raise refuse(f"messages[{i}].content part of type {kind!r} is not supported")
    return blocks


def _image_block(spec: Any, i: int, refuse: _Refuse) -> dict[str, Any]:
    url = spec.get("url") if isinstance(spec, Mapping) else spec
    if not isinstance(url, str) or not url:
        raise refuse(f"messages[{i}] has an image_url part without a url")
    if url.startswith("data:"):
        header, sep, data = url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if not sep or encoding != "base64" or not media_type:
            raise refuse(f"messages[{i}] has an image data URL that is not base64")
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _plain_text(content: Any, i: int, refuse: _Refuse) -> str:
    if isinstance(content, str):
        return content
    blocks = _blocks(content, i, refuse)
    if any(b["type"] != "text" for b in blocks):
        raise refuse(f"messages[{i}] is a system message with non-text parts")
    return "\n\n".join(b["text"] for b in blocks)


def anthropic_to_openai(resp: Mapping[str, Any], *, model: str, created: int) -> dict[str, Any]:
    """The OpenAI `chat.completion` body for an Anthropic Messages response."""
    content = resp.get("content")
    usage = resp.get("usage")
    if not isinstance(content, list):
        raise ValueError("no 'content' list")
    if not isinstance(usage, Mapping):
        raise ValueError("no 'usage' object")
    input_tokens = _count(usage, "input_tokens", required=True)
    output_tokens = _count(usage, "output_tokens", required=True)
    cache_read = _count(usage, "cache_read_input_tokens")
    cache_write = _count(usage, "cache_creation_input_tokens")

    texts: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, Mapping):
            raise ValueError("a content block is not an object")
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise ValueError("a text block has no text")
            texts.append(text)
        elif kind == "tool_use":
            tool_calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {
                        "name": block.get("name"),
                        "arguments": orjson.dumps(block.get("input")).decode(),
                    },
                }
            )
    reply = "".join(texts) if texts or not tool_calls else None
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    if tool_calls:
        message["tool_calls"] = tool_calls
    stop_reason = resp.get("stop_reason")
    finish = FINISH_REASONS.get(stop_reason, "stop") if isinstance(stop_reason, str) else None
    prompt_tokens = input_tokens + cache_read + cache_write
    resp_model = resp.get("model")
    return {
        "id": resp.get("id"),
        "object": "chat.completion",
        "created": created,
        "model": resp_model if isinstance(resp_model, str) and resp_model else model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
            "prompt_tokens_details": {"cached_tokens": cache_read},
        },
    }


def _count(usage: Mapping[str, Any], name: str, *, required: bool = False) -> int:
    value = usage.get(name)
    if value is None and not required:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usage.{name} is not a non-negative integer")
    return value
