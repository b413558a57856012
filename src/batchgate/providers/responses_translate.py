"""OpenAI Responses ⇄ Anthropic Messages, both ways (pure functions, no I/O).

A Responses body routed to an Anthropic target is expressed as the chat body it means and then
translated like any chat body (`translate.openai_to_anthropic`: the system prompt as the top-level
`system` field, roles alternating from user, `max_tokens` required — PROTOCOLS.md, "Chat
requests"):

- `instructions` and `system`/`developer` input items → `system`;
- `input` as a string → one user message; as items → messages (`{role, content}` items, with or
  without `type: "message"`), their `input_text`/`output_text` parts → text blocks and
  `input_image` parts with an `image_url` → image blocks (a data URL as base64);
- `max_output_tokens` → `max_tokens` (the provider's default when absent); `temperature`,
  `top_p` pass through; `user` → `metadata.user_id`;
- `text.format` of type `json_schema` (or `json_object`) → one tool whose `input_schema` is the
  schema, forced with `tool_choice`: the Messages API's way to make the answer a JSON object of
  that schema (its `tool_use` block's `input`), available in `anthropic-version: 2023-06-01` on
  every model; the answer's JSON comes back as the `output_text`;
- `store` (true by default: the answer is the same, only not kept by OpenAI), `parallel_tool_calls`
  (no tools are carried), `service_tier: "auto"` and `truncation: "disabled"` ask for nothing
  Messages would not do: they are carried as nothing. `metadata`, `prompt_cache_key` and other
  service tiers have no equivalent and are refused like any other field.

Every other field (built-in and function tools, `reasoning`, `previous_response_id`,
`conversation`, `include`, `background`, streaming, …) and every other input item or part type
(function calls, files, image file ids) cannot be expressed in Messages: `responses_problem` names
it, and validation refuses the line before anything is sent.

`anthropic_to_response` turns a Messages answer into a Responses `response` body: `status:
incomplete` with `incomplete_details.reason = "max_output_tokens"` when it stopped at
`max_tokens` (an answer, not an error), usage as `input_tokens` (cache reads and writes included),
`input_tokens_details.cached_tokens` (cache reads) and `.cache_write_tokens` (cache writes: the
official SDK's `ResponseUsage` requires the field), `output_tokens`, `total_tokens`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.endpoints import ENDPOINT_KEY
from batchgate.errors import BadRequestError
from batchgate.providers.translate import anthropic_to_openai, openai_to_anthropic

SCHEMA_TOOL = "json_output"  # the forced tool's name when `text.format` gives none
_PASSED = frozenset({"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "user"})
_NEUTRAL = frozenset({"store", "parallel_tool_calls"})  # any value: nothing Messages would not do
_ROLES = frozenset({"user", "assistant", "system", "developer"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


class Untranslatable(ValueError):
    """A Responses field that Messages cannot express; the message names it."""


def responses_problem(body: Mapping[str, Any]) -> str | None:
    """Why a Responses body cannot be sent to Anthropic Messages (naming the field), or None: the
    whole translation, as the client will make it."""
    try:
        responses_to_anthropic(body, model="", default_max_tokens=1)
    except BadRequestError as exc:
        return exc.message
    return None


def responses_to_anthropic(
    body: Mapping[str, Any], *, model: str, default_max_tokens: int, provider: str = ""
) -> dict[str, Any]:
    """The Anthropic Messages body for an OpenAI Responses body (`BadRequestError` if it cannot
    be expressed, before anything is sent)."""
    try:
        chat, schema = _as_chat(body)
    except Untranslatable as exc:
        where = f"{provider}: " if provider else ""
        raise BadRequestError(
            f"{where}cannot translate to Anthropic Messages: {exc}", provider=provider
        ) from None
    out = openai_to_anthropic(chat, model=model, default_max_tokens=default_max_tokens, provider=provider)
    if schema is not None:
        name, description, input_schema = schema
        tool: dict[str, Any] = {"name": name, "input_schema": input_schema}
        if description:
            tool["description"] = description
        out["tools"] = [tool]
        out["tool_choice"] = {"type": "tool", "name": name}
    return out


def responses_as_chat(body: Mapping[str, Any], *, provider: str) -> dict[str, Any]:
    """The chat body a Responses body means, for a streamed call to a kind that speaks chat's
    terms (Gemini, Bedrock: their events rendered back as Responses events); `BadRequestError` for
    what it cannot carry (a `text.format` schema among them), before anything is sent."""
    try:
        chat, schema = _as_chat({k: v for k, v in body.items() if k != "stream"})
    except Untranslatable as exc:
        message = f"{provider}: cannot stream this Responses body: {exc}"
        raise BadRequestError(message, provider=provider) from None
    if schema is not None:
        message = f"{provider}: cannot stream this Responses body: text.format is not carried"
        raise BadRequestError(message, provider=provider)
    return chat


def anthropic_to_response(resp: Mapping[str, Any], *, model: str, created: int) -> dict[str, Any]:
    """The Responses `response` body for an Anthropic Messages answer (`ValueError` when it is not one)."""
    chat = anthropic_to_openai(resp, model=model, created=created)
    choice = chat["choices"][0]
    message = choice["message"]
    text = message["content"] or ""
    calls = message.get("tool_calls") or []
    if calls:  # the forced schema tool: its input is the JSON answer
        text = calls[0]["function"]["arguments"]
    cut = choice["finish_reason"] == "length"
    usage = chat["usage"]
    rid = str(chat["id"] or "")
    return {
        "id": "resp_" + rid.removeprefix("msg_"),
        "object": "response",
        "created_at": created,
        "status": "incomplete" if cut else "completed",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "model": chat["model"],
        "output": [
            {
                "type": "message",
                "id": rid or "msg_",
                "status": "incomplete" if cut else "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {
                "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"],
                "cache_write_tokens": _cache_writes(resp),
            },
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        },
    }


_Schema = tuple[str, str, dict[str, Any]]


def _as_chat(body: Mapping[str, Any]) -> tuple[dict[str, Any], _Schema | None]:
    """The chat body a Responses body means, and the JSON schema its answer must follow (if any)."""
    for name, value in body.items():
        if name in _PASSED or name in _NEUTRAL or name in (ENDPOINT_KEY, "text", "truncation", "stream"):
            continue
        if name == "service_tier" and value in ("auto", "default"):
            continue
        if value is not None:
            raise Untranslatable(f"field {name!r} has no Messages equivalent")
    if body.get("stream"):
        raise Untranslatable("field 'stream': streaming is not supported")
    if body.get("truncation") not in (None, "disabled"):
        raise Untranslatable(f"field 'truncation' {body['truncation']!r} (only 'disabled')")
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    value = body.get("input")
    if isinstance(value, str):
        messages.append({"role": "user", "content": value})
    elif isinstance(value, list):
        messages.extend(_message(item, i) for i, item in enumerate(value))
    chat: dict[str, Any] = {"messages": messages}
    for name in ("temperature", "top_p", "user"):
        if body.get(name) is not None:
            chat[name] = body[name]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    return chat, _schema(body.get("text"))


def _message(item: Any, i: int) -> dict[str, Any]:
    where = f"input[{i}]"
    if not isinstance(item, Mapping):
        raise Untranslatable(f"{where} is not an object")
    kind = item.get("type", "message")
    if kind != "message":
        raise Untranslatable(f"{where}.type {kind!r} (only message items translate)")
    role = item.get("role")
    if role not in _ROLES:
        raise Untranslatable(f"{where}.role {role!r}")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise Untranslatable(f"{where}.content must be a string or a list of parts")
    return {"role": role, "content": [_part(part, f"{where}.content[{j}]") for j, part in enumerate(content)]}


def _part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image":
        url = part.get("image_url")
        if isinstance(url, str) and url:
            return {"type": "image_url", "image_url": {"url": url}}
        raise Untranslatable(f"{where}: an input_image translates only with an image_url (not a file_id)")
    raise Untranslatable(f"{where}.type {kind!r}")


def _schema(text: Any) -> _Schema | None:
    if text is None:
        return None
    if not isinstance(text, Mapping):
        raise Untranslatable("field 'text' must be an object")
    for name in text:
        if name != "format":
            raise Untranslatable(f"field 'text.{name}' has no Messages equivalent")
    fmt = text.get("format")
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if fmt is None or kind == "text":
        return None
    if kind == "json_object":
        return SCHEMA_TOOL, "", {"type": "object"}
    if kind != "json_schema":
        raise Untranslatable(f"field 'text.format.type' {kind!r}")
    assert isinstance(fmt, Mapping)
    schema = fmt.get("schema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise Untranslatable("field 'text.format.schema' must be a JSON schema of type object")
    name = fmt.get("name")
    description = fmt.get("description")
    return (
        name if isinstance(name, str) and name else SCHEMA_TOOL,
        description if isinstance(description, str) else "",
        dict(schema),
    )


def _cache_writes(resp: Mapping[str, Any]) -> int:
    """The answer's `cache_creation_input_tokens` (checked by `anthropic_to_openai` already)."""
    usage = resp["usage"]
    value = usage.get("cache_creation_input_tokens")
    return value if isinstance(value, int) else 0
