"""OpenAI Chat Completions ⇄ Anthropic Messages, both ways (pure functions, no I/O).

Requests enter batchgate in the OpenAI shape; `openai_to_anthropic` builds the Messages body:

- `system` and `developer` messages move to the top-level `system` field, joined by blank lines;
- the rest must alternate user/assistant starting with user: consecutive messages of one role are
  merged into one message of text blocks (nothing fake is inserted); a conversation that starts
  with an assistant message is refused;
- text parts become text blocks, `image_url` parts become image blocks (data URLs as base64);
- `max_completion_tokens` (or `max_tokens`, or the provider's default) becomes `max_tokens`;
  `temperature`, `top_p`, `top_k` pass through; `stop` (a string or a list) becomes
  `stop_sequences`; `user` becomes `metadata.user_id`; tools, tool choices, tool calls and
  results, `response_format` and `reasoning_effort` as `translate_tools` says.

Every other field is in `REFUSED` (or unknown): `check_fields` raises `UnsupportedField` naming
it (validation refuses the line before the job exists: `providers.fields`), unless its value
means nothing here (`n: 1`, `logprobs: false`, ...). A body holding `MESSAGES_PARAMS` (an
Anthropic-shaped line) is sent as its params, whole.

`anthropic_to_openai` turns a Messages response into a `chat.completion` body whose usage counts
cache reads and writes as prompt tokens and reports cache reads as `cached_tokens`.
Refusals raise `BadRequestError` at send time; a response that is not a Messages response raises `ValueError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from batchgate.endpoints import CHAT, ENDPOINT_KEY, MESSAGES_PARAMS, PATHS, endpoint_of
from batchgate.errors import BadRequestError, UnsupportedField
from batchgate.providers import translate_tools as tt
from batchgate.request_fields import OWN_FIELDS

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
CARRIED: frozenset[str] = frozenset(
    {
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
        "stop", "user", "tools", "tool_choice", "parallel_tool_calls", "response_format",
        "reasoning_effort",
    }
)  # fmt: skip
_NONE = "Anthropic Messages has no equivalent"
REFUSED: Mapping[str, str] = {
    "n": "Anthropic returns one choice (only n: 1 is carried)",
    "stream": "streamed answers are not translated (only stream: false)",
    "stream_options": "streamed answers are not translated",
    "seed": f"{_NONE} (no seeded sampling)",
    "frequency_penalty": f"{_NONE} (only 0 is carried)",
    "presence_penalty": f"{_NONE} (only 0 is carried)",
    "logit_bias": _NONE,
    "logprobs": f"{_NONE} (only logprobs: false is carried)",
    "top_logprobs": _NONE,
    "functions": "deprecated; give them as tools",
    "function_call": "deprecated; give it as tool_choice",
    "audio": _NONE,
    "modalities": f"{_NONE} (text output only)",
    "prediction": _NONE,
    "web_search_options": "give Anthropic's web search tool in an Anthropic-shaped line",
    "service_tier": "OpenAI's service tiers are not Anthropic's (only auto is carried)",
    "store": "Anthropic stores no completions (only store: false is carried)",
    "metadata": "Anthropic takes only a user id (give it as user)",
    "prompt_cache_key": "Anthropic caches by cache_control breakpoints, not keys",
    "prompt_cache_retention": _NONE,
    "safety_identifier": "give it as user",
    "verbosity": _NONE,
}
# values of refused fields that ask for nothing Anthropic would not do anyway
_NEUTRAL: Mapping[str, tuple[Any, ...]] = {
    "n": (1,), "stream": (False,), "logprobs": (False,), "store": (False,), "service_tier": ("auto",),
    "frequency_penalty": (0,), "presence_penalty": (0,), "modalities": (["text"],),
}  # fmt: skip
_OWN = frozenset({ENDPOINT_KEY, MESSAGES_PARAMS, *OWN_FIELDS})  # batchgate's own: never sent
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id"})

_Refuse = Callable[[str], BadRequestError]


def check_fields(body: Mapping[str, Any]) -> None:
    """Raise `UnsupportedField` for the first top-level field Messages cannot carry."""
    for name, value in body.items():
        if value is None or name in CARRIED or name in _OWN:
            continue
        if any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in _NEUTRAL.get(name, ())):
            continue
        raise UnsupportedField(name, tt.TARGET, REFUSED.get(name, "not a chat field batchgate can translate"))


def translate_fields(body: Mapping[str, Any], default_max_tokens: int) -> None:
    """Translate `body` as the client will, raising `UnsupportedField` for the first field (top
    level or nested) Messages cannot carry; other problems are left for the send to report."""

    def refuse(reason: str) -> BadRequestError:
        return BadRequestError(reason)

    if _plain(body):
        return  # the common line: nothing in it can be refused
    with contextlib.suppress(BadRequestError):
        _to_messages(body, "", default_max_tokens, refuse)


_PLAIN_FIELDS = frozenset(
    {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p"}
)


def _plain(body: Mapping[str, Any]) -> bool:
    """Only plain fields, and messages of a role and a string each (checked without translating)."""
    messages = body.get("messages")
    return (
        all(name in _PLAIN_FIELDS or name in _OWN for name in body)
        and isinstance(messages, list)
        and all(isinstance(m, dict) and len(m) == 2 and isinstance(m.get("content"), str) for m in messages)
    )


def openai_to_anthropic(
    body: Mapping[str, Any], *, model: str, default_max_tokens: int, provider: str = ""
) -> dict[str, Any]:
    """The Anthropic Messages body for an OpenAI Chat Completions body (an Anthropic-shaped line's
    params whole, with the target's model)."""

    def refuse(reason: str) -> BadRequestError:
        where = f"{provider}: " if provider else ""
        return BadRequestError(f"{where}cannot translate to Anthropic Messages: {reason}", provider=provider)

    params = body.get(MESSAGES_PARAMS)
    if isinstance(params, Mapping):
        return {**params, "model": model, "max_tokens": params.get("max_tokens") or default_max_tokens}
    try:
        return _to_messages(body, model, default_max_tokens, refuse)
    except UnsupportedField as exc:
        raise refuse(exc.message) from None


def _to_messages(
    body: Mapping[str, Any], model: str, default_max_tokens: int, refuse: _Refuse
) -> dict[str, Any]:

    endpoint = endpoint_of(body)
    if endpoint != CHAT:
        raise refuse(f"url {PATHS[endpoint]} is not served by Anthropic (chat and Responses are translated)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise refuse("'messages' must be a non-empty list")
    check_fields(body)
    system, turns = _turns(messages, refuse)
    max_tokens = _max_tokens(body, default_max_tokens, refuse)
    out: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if system:
        out["system"] = "\n\n".join(system)
    out["messages"] = turns
    for name in ("temperature", "top_p", "top_k"):
        value = body.get(name)
        if value is not None:
            out[name] = value
    stop = _stop_sequences(body.get("stop"), refuse)
    if stop:
        out["stop_sequences"] = stop
    user = body.get("user")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    _tooling(body, out, max_tokens)
    return out


def _tooling(body: Mapping[str, Any], out: dict[str, Any], max_tokens: int) -> None:
    """tools, tool_choice, response_format and reasoning_effort (`translate_tools`)."""
    if body.get("tools") is not None:
        out["tools"] = tt.tools(body["tools"])
    choice = tt.tool_choice(body)
    forced = tt.response_tool(body.get("response_format"))
    thinking = tt.thinking(body.get("reasoning_effort"), max_tokens)
    if forced is not None:
        if out.get("tools") or choice is not None:
            raise UnsupportedField("response_format", tt.TARGET, "it is a forced tool: no tools beside it")
        if thinking is not None:
            raise UnsupportedField("response_format", tt.TARGET, "no tool can be forced while thinking")
        out["tools"] = [forced]
        choice = {"type": "tool", "name": tt.RESPONSE_TOOL}
    if choice is not None:
        out["tool_choice"] = choice
    if thinking is not None:
        out["thinking"] = thinking


def _turns(messages: list[Any], refuse: _Refuse) -> tuple[list[str], list[dict[str, Any]]]:
    """The system texts and the alternating user/assistant turns (same-role neighbours merged)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise refuse(f"messages[{i}] must be an object")
        role = message.get("role")
        for key in message:
            if key not in _MESSAGE_KEYS and message[key] is not None:
                raise UnsupportedField(f"messages[{i}].{key}", tt.TARGET, _NONE)
        if role in _SYSTEM_ROLES:
            system.append(_plain_text(message.get("content"), i, refuse))
            continue
        if role not in _CHAT_ROLES and role != "tool":
            raise refuse(f"messages[{i}].role {role!r} is not supported")
        role, content = _turn_content(message, i, refuse)
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]
            previous["content"] = _as_blocks(previous["content"]) + _as_blocks(content)
            continue
        if not turns and role != "user":
            raise refuse("the first non-system message must come from the user")
        turns.append({"role": role, "content": content})
    if not turns:
        raise refuse("there is no user message")
    return system, turns


def _turn_content(message: Mapping[str, Any], i: int, refuse: _Refuse) -> tuple[str, Any]:
    """A user or assistant message's content (an assistant's tool calls as `tool_use` blocks), or
    a `tool` message as the user turn holding its `tool_result` block."""
    if message.get("role") == "tool":
        return "user", [tt.tool_result_block(message, i)]
    content = message.get("content")
    if message.get("tool_calls") is None:
        return message["role"], _content(content, i, refuse)
    if message.get("role") != "assistant":
        raise UnsupportedField(f"messages[{i}].tool_calls", tt.TARGET, "only an assistant calls tools")
    text = [] if content in (None, "", []) else _blocks(content, i, refuse)
    return "assistant", text + tt.tool_use_blocks(message, i)


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
    if tt.answer_of_tool(message) and finish == "tool_calls":  # response_format's forced tool
        finish = "stop"
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
