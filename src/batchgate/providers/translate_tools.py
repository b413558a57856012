"""The OpenAI chat fields beyond plain text that Anthropic Messages can carry, translated (pure).

- `tools` (function tools) → Messages tools (`parameters` → `input_schema`); `strict: true` and
  other tool types are refused;
- `tool_choice`: "auto" / "none" / "required" → `{type: auto | none | any}`, a named function →
  `{type: tool, name}`; `parallel_tool_calls: false` → `disable_parallel_tool_use: true`;
- an assistant's `tool_calls` → `tool_use` blocks; a `tool` message → a user `tool_result` block;
- `response_format` `json_schema` (or `json_object`) → one tool, `RESPONSE_TOOL`, whose input
  schema is the schema, forced by `tool_choice` — the Messages API's way to make the answer a JSON
  object (the same as `responses_translate` for `text.format`); `answer_of_tool` puts its input
  back as the message's content;
- `reasoning_effort` → `thinking: {type: enabled, budget_tokens}` (minimal 1,024, low 2,048,
  medium 8,192, high 24,576, kept under `max_tokens`; "none" → no thinking).
Every refusal raises `UnsupportedField` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.errors import UnsupportedField

TARGET = "anthropic"
RESPONSE_TOOL = "json_response"  # the forced tool of a `response_format` (a name users may not take)
BUDGETS: Mapping[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
_MIN_BUDGET = 1024
_CHOICES: Mapping[str, str] = {"auto": "auto", "none": "none", "required": "any"}


def _refuse(field: str, reason: str) -> UnsupportedField:
    return UnsupportedField(field, TARGET, reason)


def tools(value: Any) -> list[dict[str, Any]]:
    """Messages tools for OpenAI function tools."""
    if not isinstance(value, list):
        raise _refuse("tools", "must be a list")
    out = []
    for tool in value:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or tool.get("type") != "function":
            raise _refuse("tools", "only function tools have a Messages equivalent")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _refuse("tools", "a function tool needs a name")
        if name == RESPONSE_TOOL:
            raise _refuse("tools", f"the tool name {RESPONSE_TOOL!r} is batchgate's own (response_format)")
        if function.get("strict") is True:
            raise _refuse("tools", "strict function schemas are not enforced by Messages")
        converted: dict[str, Any] = {"name": name}
        if function.get("description") is not None:
            converted["description"] = function["description"]
        converted["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(converted)
    return out


def tool_choice(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Messages `tool_choice` for the body's `tool_choice` and `parallel_tool_calls`."""
    value = body.get("tool_choice")
    choice: dict[str, Any] | None = None
    if isinstance(value, str) and value in _CHOICES:
        choice = {"type": _CHOICES[value]}
    elif isinstance(value, Mapping) and value.get("type") == "function":
        name = value.get("function", {}).get("name") if isinstance(value.get("function"), Mapping) else None
        if not isinstance(name, str):
            raise _refuse("tool_choice", "a named choice needs function.name")
        choice = {"type": "tool", "name": name}
    elif value is not None:
        raise _refuse("tool_choice", f"{value!r} has no Messages equivalent")
    if body.get("parallel_tool_calls") is False:
        choice = choice or {"type": "auto"}
        choice["disable_parallel_tool_use"] = True
    return choice


def response_tool(value: Any) -> dict[str, Any] | None:
    """The forced tool that makes the answer follow `response_format` (None: plain text)."""
    kind = value.get("type") if isinstance(value, Mapping) else None
    if value is None or kind == "text":
        return None
    if kind == "json_object":
        return {"name": RESPONSE_TOOL, "input_schema": {"type": "object"}}
    spec = value.get("json_schema") if kind == "json_schema" else None
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if not isinstance(schema, Mapping):
        raise _refuse("response_format", "only text, json_object and json_schema (with a schema) are carried")
    if schema.get("type") != "object":
        raise _refuse("response_format", "a tool input schema must describe an object")
    tool: dict[str, Any] = {"name": RESPONSE_TOOL, "input_schema": dict(schema)}
    if isinstance(spec, Mapping) and isinstance(spec.get("description"), str):
        tool["description"] = spec["description"]
    return tool


def thinking(effort: Any, max_tokens: int) -> dict[str, Any] | None:
    """The Messages `thinking` for a `reasoning_effort` (None: no thinking)."""
    if effort is None or effort == "none":
        return None
    if effort not in BUDGETS:
        raise _refuse("reasoning_effort", f"{effort!r} is not one of {', '.join(BUDGETS)}")
    budget = min(BUDGETS[effort], max_tokens - 1)
    if budget < _MIN_BUDGET:
        raise _refuse("reasoning_effort", f"thinking needs max_tokens above {_MIN_BUDGET}, got {max_tokens}")
    return {"type": "enabled", "budget_tokens": budget}


def tool_use_blocks(message: Mapping[str, Any], i: int) -> list[dict[str, Any]]:
    """An assistant message's `tool_calls` as `tool_use` blocks."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        raise _refuse(f"messages[{i}].tool_calls", "must be a list")
    blocks = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(call.get("id"), str):
            raise _refuse(f"messages[{i}].tool_calls", "each call needs an id and a function")
        try:
            arguments = orjson.loads(function.get("arguments") or "{}")
        except (orjson.JSONDecodeError, TypeError):
            raise _refuse(f"messages[{i}].tool_calls", "arguments must be a JSON object") from None
        name = function.get("name")
        blocks.append({"type": "tool_use", "id": call["id"], "name": name, "input": arguments})
    return blocks


def tool_result_block(message: Mapping[str, Any], i: int) -> dict[str, Any]:
    """A `tool` message as a `tool_result` block (its text content)."""
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise _refuse(f"messages[{i}].tool_call_id", "a tool message needs the id of its call")
    content = message.get("content")
    if isinstance(content, list):
        if not all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
            raise _refuse(f"messages[{i}].content", "a tool message holds text only")
        content = [{"type": "text", "text": p.get("text")} for p in content]
    elif not isinstance(content, str):
        raise _refuse(f"messages[{i}].content", "must be a string or text parts")
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def answer_of_tool(message: dict[str, Any]) -> bool:
    """Turn a forced `RESPONSE_TOOL` call back into the JSON content `response_format` asked for
    (in place); True when it was one."""
    calls = message.get("tool_calls") or []
    if len(calls) != 1 or calls[0]["function"]["name"] != RESPONSE_TOOL:
        return False
    message["content"] = calls[0]["function"]["arguments"]
    del message["tool_calls"]
    return True
