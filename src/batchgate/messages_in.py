"""Anthropic Messages params (a Message Batches line, the proxy's `/v1/messages`) as the OpenAI chat
body they mean, and the fields of theirs that body cannot carry (pure functions, no I/O).

An Anthropic target is sent the params whole (`endpoints.MESSAGES_PARAMS`); every other target is
sent this translation, so each field is either carried or refused, never dropped:

- carried: `model`, `system` (a string or text blocks → a system message), `messages` (text and
  image blocks → parts; `tool_use` blocks → the assistant's `tool_calls`; `tool_result` blocks →
  `tool` messages), `max_tokens`, `temperature`, `top_p`, `stop_sequences` → `stop`,
  `metadata.user_id` → `user`, custom `tools` → function tools, `tool_choice` (auto, any →
  required, tool → the named function, none; `disable_parallel_tool_use` → `parallel_tool_calls:
  false`), `thinking` (enabled → `reasoning_effort` by its budget; disabled → nothing), `stream`;
- refused (`REFUSED`, and `cache_control` anywhere, `thinking`/`document` blocks, server tools,
  `tool_result` errors or images): OpenAI Chat Completions has no equivalent. `refusal` names the
  first, for validation to refuse the line before the job exists.

A structural problem (messages not a non-empty list, a block that is not an object) raises
`MessagesShapeError`, whatever the target.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.errors import UnsupportedField

CARRIED: frozenset[str] = frozenset(
    {
        "model", "messages", "system", "max_tokens", "temperature", "top_p", "stop_sequences",
        "metadata", "tools", "tool_choice", "thinking", "stream",
    }
)  # fmt: skip
REFUSED: Mapping[str, str] = {
    "top_k": "OpenAI Chat Completions has no top_k",
    "service_tier": "OpenAI's service tiers are not Anthropic's",
    "container": "OpenAI Chat Completions has no code-execution container",
    "mcp_servers": "OpenAI Chat Completions has no MCP connector",
    "context_management": "OpenAI Chat Completions has no context management",
    "cache_control": "OpenAI caches prompt prefixes by itself and takes no cache breakpoints",
}
# thinking budgets → OpenAI's effort (translate.py maps efforts back to 2,048, 8,192 and 24,576)
_EFFORT_BELOW = ((4096, "low"), (16384, "medium"))


class MessagesShapeError(ValueError):
    """Params that are not Anthropic Messages params; the message says where."""


class _Walk:
    """One translation: the OpenAI body built so far and the first field it could not carry."""

    def __init__(self) -> None:
        self.refused: tuple[str, str] | None = None

    def refuse(self, field: str, reason: str) -> None:
        if self.refused is None:
            self.refused = (field, reason)

    def cached(self, block: Mapping[str, Any]) -> None:
        if "cache_control" in block:
            self.refuse("cache_control", REFUSED["cache_control"])


def messages_to_chat(params: Any) -> dict[str, Any]:
    """The OpenAI chat body `params` mean (what can be carried; see `refusal` for the rest)."""
    return _translate(params)[0]


def refusal(params: Any, target_kind: str) -> UnsupportedField | None:
    """The first field of `params` a `target_kind` target (OpenAI-shaped wire) cannot carry, or None."""
    if _plain(params):
        return None  # the common line: nothing in it can be refused
    refused = _translate(params)[1]
    return None if refused is None else UnsupportedField(refused[0], target_kind, refused[1])


_PLAIN_FIELDS = frozenset({"model", "messages", "max_tokens", "temperature", "top_p", "stop_sequences"})


def _plain(params: Any) -> bool:
    """Only plain fields, a string system prompt, messages of a role and a string each."""
    messages = params.get("messages") if isinstance(params, Mapping) else None
    if not isinstance(messages, list):
        return False
    if not all(n in _PLAIN_FIELDS or (n == "system" and isinstance(v, str)) for n, v in params.items()):
        return False
    return all(isinstance(m, Mapping) and len(m) == 2 and isinstance(m.get("content"), str) for m in messages)


def _translate(params: Any) -> tuple[dict[str, Any], tuple[str, str] | None]:
    if not isinstance(params, Mapping):
        raise MessagesShapeError("params must be a JSON object")
    walk = _Walk()
    for name in params:
        if name not in CARRIED:
            walk.refuse(name, REFUSED.get(name, "not an Anthropic Messages field batchgate can translate"))
    body: dict[str, Any] = {"model": params.get("model")}
    messages: list[dict[str, Any]] = []
    if params.get("system") is not None:
        messages.append({"role": "system", "content": _system(params["system"], walk)})
    raw = params.get("messages")
    if not isinstance(raw, list) or not raw:
        raise MessagesShapeError("params.messages must be a non-empty list")
    for i, message in enumerate(raw):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise MessagesShapeError(f"params.messages[{i}] must be an object with a string role")
        messages.extend(_message(message, f"params.messages[{i}]", walk))
    body["messages"] = messages
    for key in ("max_tokens", "temperature", "top_p", "stream"):
        if key in params:
            body[key] = params[key]
    if "stop_sequences" in params:
        body["stop"] = params["stop_sequences"]
    _options(params, body, walk)
    return body, walk.refused


def _options(params: Mapping[str, Any], body: dict[str, Any], walk: _Walk) -> None:
    """metadata, tools, tool_choice and thinking."""
    metadata = params.get("metadata")
    if isinstance(metadata, Mapping):
        if set(metadata) - {"user_id"}:
            walk.refuse("metadata", "OpenAI takes only metadata.user_id (as user)")
        if isinstance(metadata.get("user_id"), str):
            body["user"] = metadata["user_id"]
    elif metadata is not None:
        walk.refuse("metadata", "must be an object")
    if params.get("tools") is not None:
        body["tools"] = _tools(params["tools"], walk)
    choice = params.get("tool_choice")
    if choice is not None:
        _tool_choice(choice, body, walk)
    thinking = params.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and not isinstance(budget, bool):
            body["reasoning_effort"] = next((e for top, e in _EFFORT_BELOW if budget < top), "high")
        else:
            walk.refuse("thinking", "budget_tokens must be an integer")
    elif thinking is not None and not (isinstance(thinking, Mapping) and thinking.get("type") == "disabled"):
        walk.refuse("thinking", f"type {thinking!r} has no OpenAI equivalent")


def _tools(tools: Any, walk: _Walk) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        walk.refuse("tools", "must be a list")
        return []
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, Mapping) or tool.get("type", "custom") != "custom":
            kind = tool.get("type") if isinstance(tool, Mapping) else None
            walk.refuse("tools", f"server tool {kind!r} has no OpenAI equivalent")
            continue
        walk.cached(tool)
        function: dict[str, Any] = {"name": tool.get("name")}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        function["parameters"] = tool.get("input_schema") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any, body: dict[str, Any], walk: _Walk) -> None:
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind == "tool":
        body["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif kind in ("auto", "any", "none"):
        body["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
    else:
        walk.refuse("tool_choice", f"type {kind!r} has no OpenAI equivalent")
        return
    if choice.get("disable_parallel_tool_use") is True:
        body["parallel_tool_calls"] = False


def _system(system: Any, walk: _Walk) -> str:
    if isinstance(system, str):
        return system
    if not isinstance(system, list) or not system:
        raise MessagesShapeError("params.system must be a string or a non-empty list of text blocks")
    texts = []
    for i, block in enumerate(system):
        text = block.get("text") if isinstance(block, Mapping) else None
        if not isinstance(block, Mapping) or block.get("type") != "text" or not isinstance(text, str):
            raise MessagesShapeError(f"params.system[{i}] may hold only text blocks")
        walk.cached(block)
        texts.append(block["text"])
    return "\n".join(texts)


def _message(message: Mapping[str, Any], where: str, walk: _Walk) -> list[dict[str, Any]]:
    """One Anthropic message as OpenAI messages: `tool` messages for its tool results, first."""
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list) or not content:
        raise MessagesShapeError(f"{where}.content must be a string or a non-empty list of content blocks")
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        if not isinstance(block, Mapping):
            raise MessagesShapeError(f"{where}.content[{i}] must be an object")
        walk.cached(block)
        kind = block.get("type")
        if kind == "tool_result":
            tools.append(_tool_result(block, walk))
        elif kind == "tool_use":
            arguments = orjson.dumps(block.get("input", {})).decode()
            calls.append({"id": block.get("id"), "type": "function",
                          "function": {"name": block.get("name"), "arguments": arguments}})  # fmt: skip
        else:
            parts.append(_part(block, f"{where}.content[{i}]", walk))
    out = list(tools)
    if parts or calls or not tools:
        text_only = all(p.get("type") == "text" for p in parts)
        joined: Any = "\n".join(p["text"] for p in parts) if text_only else parts
        turn: dict[str, Any] = {"role": role, "content": joined if parts or not calls else None}
        if calls:
            turn["tool_calls"] = calls
        out.append(turn)
    return out


def _tool_result(block: Mapping[str, Any], walk: _Walk) -> dict[str, Any]:
    if block.get("is_error") is True:
        walk.refuse("tool_result.is_error", "OpenAI tool messages have no error flag")
    content = block.get("content", "")
    if isinstance(content, list):
        texts = []
        for item in content:
            if isinstance(item, Mapping) and item.get("type") == "text" and isinstance(item.get("text"), str):
                walk.cached(item)
                texts.append(item["text"])
            else:
                walk.refuse("tool_result.content", "OpenAI tool messages hold text only")
        content = "\n".join(texts)
    return {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": content}


def _part(block: Mapping[str, Any], where: str, walk: _Walk) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    source = block.get("source")
    if kind == "image" and isinstance(source, Mapping):
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
            return {"type": "image_url", "image_url": {"url": url}}
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return {"type": "image_url", "image_url": {"url": source["url"]}}
    if kind in ("thinking", "redacted_thinking", "document", "search_result", "server_tool_use"):
        walk.refuse(f"{kind} block", f"OpenAI chat messages have no {kind} content")
        return {"type": "text", "text": ""}
    raise MessagesShapeError(f"{where}: unsupported content block type {kind!r}")
