"""OpenAI Chat Completions ⇄ Bedrock Runtime Converse, both ways (pure functions, no I/O).

The Converse body (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html,
shared/PROTOCOLS.md "AWS Bedrock"): `messages[{role, content[ContentBlock]}]` alternating
user/assistant, `system[{text}]`, `inferenceConfig{maxTokens, temperature, topP, stopSequences}`,
`toolConfig{tools[{toolSpec{name, description, inputSchema{json}}}], toolChoice{auto|any|tool}}`,
`additionalModelRequestFields` (the model's own fields), `requestMetadata` (a string map).

`openai_to_converse` carries every field of `CARRIED` (system/developer messages, text and
base64 image parts, `cache_control` as a `cachePoint`, assistant `tool_calls` as `toolUse`,
`tool` messages as `toolResult`, max_tokens, temperature, top_p, stop, tools, tool_choice, top_k,
user and metadata, a JSON response_format as a forced tool: `output_tool`) and raises
`UnsupportedField` for a field of `REFUSED` or one in neither set — never dropping one. The
answer's way back is `providers.bedrock_answer`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.endpoints import CHAT, ENDPOINT_KEY, PATHS, endpoint_of
from batchgate.errors import UnsupportedField

KIND = "bedrock"
CARRIED: frozenset[str] = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "tools",
        "tool_choice",
        "top_k",
        "n",  # 1 only: Converse returns one choice
        "stream",  # false only: the client streams when its config says so
        "user",
        "metadata",
        "response_format",  # json_schema / json_object: a forced tool whose input is the answer
    }
)
REFUSED: Mapping[str, str] = {
    "seed": "Converse has no seed",
    "frequency_penalty": "Converse has no frequency penalty",
    "presence_penalty": "Converse has no presence penalty",
    "logit_bias": "Converse has no logit bias",
    "logprobs": "Converse returns no log probabilities",
    "top_logprobs": "Converse returns no log probabilities",
    "parallel_tool_calls": "Converse has no switch for parallel tool calls",
    "reasoning_effort": "Converse names no effort; set the model's reasoning in additionalModelRequestFields",
    "functions": "the deprecated functions field: use tools",
    "function_call": "the deprecated function_call field: use tool_choice",
    "audio": "Converse answers no audio",
    "modalities": "Converse answers text only",
    "prediction": "Converse has no predicted output",
    "service_tier": "Converse's tier is performanceConfig, not OpenAI's service_tier",
    "store": "Converse stores nothing",
    "stream_options": "the answer is read whole",
    "web_search_options": "Converse has no web search",
    "verbosity": "Converse has no verbosity",
    "prompt_cache_key": "Converse caches by cachePoint blocks",
    "safety_identifier": "Converse has no safety identifier",
}
IMAGE_FORMATS: Mapping[str, str] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
OUTPUT_TOOL = "structured_output"  # the forced tool of a JSON response_format without a usable name
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # Converse's toolSpec name
_SYSTEM_ROLES = frozenset({"system", "developer"})
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id"})
_FUNCTION_KEYS = frozenset({"name", "description", "parameters"})
_OWN = frozenset({ENDPOINT_KEY})  # batchgate's own keys, never sent


def refuse(field: str, reason: str) -> UnsupportedField:
    """The refusal of `field` for a Bedrock target."""
    return UnsupportedField(field, KIND, reason)


def check_fields(body: Mapping[str, Any]) -> None:
    """Raise `UnsupportedField` for a refused field, or one neither carried nor refused."""
    for name, value in body.items():
        if name in CARRIED or name in _OWN:
            continue
        if name in REFUSED:
            if value is None:
                continue  # an explicit null asks for nothing
            raise refuse(name, REFUSED[name])
        raise refuse(name, "not a field this translation knows (never dropped silently)")


def openai_to_converse(body: Mapping[str, Any], *, default_max_tokens: int) -> dict[str, Any]:
    """The Converse body for an OpenAI Chat Completions body (the model goes in the URL)."""
    endpoint = endpoint_of(body)
    if endpoint != CHAT:
        raise refuse("url", f"{PATHS[endpoint]} is not served by Bedrock Converse (chat only)")
    check_fields(body)
    _check_values(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise refuse("messages", "must be a non-empty list")
    system, turns = _turns(messages)
    out: dict[str, Any] = {"messages": turns}
    if system:
        out["system"] = system
    out["inferenceConfig"] = _inference(body, default_max_tokens)
    tools = _output_config(body) or _tool_config(body.get("tools"), body.get("tool_choice"))
    if tools is not None:
        out["toolConfig"] = tools
    if body.get("top_k") is not None:
        out["additionalModelRequestFields"] = {"top_k": body["top_k"]}
    metadata = _request_metadata(body)
    if metadata:
        out["requestMetadata"] = metadata
    return out


def _check_values(body: Mapping[str, Any]) -> None:
    """The carried fields whose value Converse cannot express."""
    if body.get("n") not in (None, 1):
        raise refuse("n", f"n={body['n']!r}: Converse returns one choice")
    if body.get("stream"):
        raise refuse("stream", "a streamed answer is not passed through (set stream: on the provider)")
    fmt = body.get("response_format")
    kinds = ("text", "json_object", "json_schema")
    if fmt is not None and not (isinstance(fmt, Mapping) and fmt.get("type") in kinds):
        raise refuse("response_format", f"must be an object of type {', '.join(kinds)}")


def output_tool(body: Mapping[str, Any]) -> str | None:
    """The tool a JSON `response_format` is forced through (its json_schema's name when Converse
    takes it as a tool name), or None when the body asks for no JSON output."""
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping) or fmt.get("type") not in ("json_object", "json_schema"):
        return None
    spec = fmt.get("json_schema")
    name = spec.get("name") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) and _TOOL_NAME.match(name) else OUTPUT_TOOL


def _output_config(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """A JSON `response_format` as Converse's structured output: one tool, forced, whose input
    schema is the format's schema (`{"type": "object"}` for json_object); its input is the answer.
    The schema's `strict` is not enforced by Converse: the model follows it as a tool schema."""
    name = output_tool(body)
    if name is None:
        return None
    if body.get("tools") is not None or body.get("tool_choice") is not None:
        raise refuse("response_format", "a JSON format is a forced tool on Converse: not with tools")
    spec = body["response_format"].get("json_schema")
    schema: Any = {"type": "object"}
    if body["response_format"]["type"] == "json_schema":
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if not isinstance(schema, Mapping):
            raise refuse("response_format", "json_schema needs a schema object")
    about = spec.get("description") if isinstance(spec, Mapping) else None
    tool = {
        "name": name,
        "description": about if isinstance(about, str) and about else "Give the answer as this tool's input.",
        "inputSchema": {"json": schema},
    }
    return {"tools": [{"toolSpec": tool}], "toolChoice": {"tool": {"name": name}}}


def _inference(body: Mapping[str, Any], default_max_tokens: int) -> dict[str, Any]:
    name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    value = body.get(name)
    if value is None:
        value = default_max_tokens
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise refuse(name, f"must be a positive integer, got {value!r}")
    config: dict[str, Any] = {"maxTokens": value}
    for name, key in (("temperature", "temperature"), ("top_p", "topP")):
        number = body.get(name)
        if number is None:
            continue
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise refuse(name, f"must be a number, got {number!r}")
        config[key] = number
    stop = body.get("stop")
    if isinstance(stop, str):
        config["stopSequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if stop:
            config["stopSequences"] = list(stop)
    elif stop is not None:
        raise refuse("stop", "must be a string or a list of strings")
    return config


def _request_metadata(body: Mapping[str, Any]) -> dict[str, str]:
    """`metadata` (a string map, as Converse's requestMetadata) and `user` under the key "user"."""
    out: dict[str, str] = {}
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise refuse("metadata", "must map strings to strings")
        out.update(metadata)
    user = body.get("user")
    if user is not None:
        if not isinstance(user, str):
            raise refuse("user", "must be a string")
        out["user"] = user
    return out


def _turns(messages: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The system blocks and the alternating user/assistant turns (same-role neighbours merged:
    Converse requires alternation; a `tool` message is the user's `toolResult`)."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise refuse(f"messages[{i}]", "must be an object")
        _check_keys(message, _MESSAGE_KEYS, f"messages[{i}]")
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            system.extend(_blocks(message.get("content"), i, images=False))
            continue
        if role == "user":
            blocks = _blocks(message.get("content"), i)
        elif role == "assistant":
            blocks = _assistant_blocks(message, i)
        elif role == "tool":
            role, blocks = "user", [_tool_result(message, i)]
        else:
            raise refuse(f"messages[{i}].role", f"{role!r} is not supported")
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        elif not turns and role != "user":
            raise refuse(f"messages[{i}]", "the first non-system message must come from the user")
        else:
            turns.append({"role": role, "content": blocks})
    if not turns:
        raise refuse("messages", "there is no user message")
    return system, turns


def _check_keys(value: Mapping[str, Any], carried: frozenset[str], where: str) -> None:
    """A key beyond `carried` holding something (an echoed `refusal: null` asks for nothing)."""
    for key, item in value.items():
        if key not in carried and item not in (None, [], {}, False):
            raise refuse(f"{where}.{key}", "Converse has no equivalent")


def _blocks(content: Any, i: int, *, images: bool = True) -> list[dict[str, Any]]:
    """Content blocks for a message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return [{"text": content}]
    if not isinstance(content, list):
        raise refuse(f"messages[{i}].content", "must be a string or a list of parts")
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            blocks.append({"text": part["text"]})
        elif kind == "image_url" and images:
            blocks.append(_image(part.get("image_url"), i))
        else:
            raise refuse(f"messages[{i}].content", f"a part of type {kind!r} is not supported here")
        extra = set(part) - {"type", "text", "image_url", "cache_control"}
        if extra:
            raise refuse(f"messages[{i}].content.{sorted(extra)[0]}", "not carried to Converse")
        if part.get("cache_control") is not None:
            blocks.append({"cachePoint": {"type": "default"}})
    return blocks


def _image(spec: Any, i: int) -> dict[str, Any]:
    """An image part as an `image` block: Converse takes bytes only, so a data URL (base64)."""
    url = spec.get("url") if isinstance(spec, Mapping) else spec
    where = f"messages[{i}].content.image_url"
    if isinstance(spec, Mapping) and spec.get("detail") not in (None, "auto"):
        raise refuse(f"{where}.detail", "Converse takes no image detail level")
    if not isinstance(url, str) or not url.startswith("data:"):
        raise refuse(where, "Converse takes image bytes only: give a base64 data URL")
    header, sep, data = url[5:].partition(",")
    media_type, _, encoding = header.partition(";")
    fmt = IMAGE_FORMATS.get(media_type.lower())
    if not sep or encoding != "base64" or fmt is None:
        raise refuse(where, f"a base64 png, jpeg, gif or webp data URL is needed, got {media_type!r}")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise refuse(where, "the data URL is not valid base64") from None
    return {"image": {"format": fmt, "source": {"bytes": data}}}


def _assistant_blocks(message: Mapping[str, Any], i: int) -> list[dict[str, Any]]:
    content = message.get("content")
    blocks = [] if content is None or content == "" else _blocks(content, i, images=False)
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise refuse(f"messages[{i}].tool_calls", "must be a list")
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise refuse(f"messages[{i}].tool_calls[{j}]", "must be a function call with a name")
        try:
            arguments = orjson.loads(function.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            raise refuse(f"messages[{i}].tool_calls[{j}]", "arguments are not JSON") from None
        use = {"toolUseId": call.get("id"), "name": function["name"], "input": arguments}
        blocks.append({"toolUse": use})
    if not blocks:
        raise refuse(f"messages[{i}].content", "an assistant message needs content or tool_calls")
    return blocks


def _tool_result(message: Mapping[str, Any], i: int) -> dict[str, Any]:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise refuse(f"messages[{i}].tool_call_id", "a tool message needs the call's id")
    return {"toolResult": {"toolUseId": call_id, "content": _blocks(message.get("content"), i, images=False)}}


def _tool_config(tools: Any, choice: Any) -> dict[str, Any] | None:
    if tools is None:
        if choice is not None:
            raise refuse("tool_choice", "is given without tools")
        return None
    if not isinstance(tools, list) or not tools:
        raise refuse("tools", "must be a non-empty list")
    specs = []
    for j, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or tool.get("type") != "function":
            raise refuse(f"tools[{j}]", "only function tools are carried")
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(function.get("name"), str) or not isinstance(schema, Mapping):
            raise refuse(f"tools[{j}].function", "needs a name and, if any, parameters as a JSON schema")
        _check_keys(function, _FUNCTION_KEYS, f"tools[{j}].function")  # `strict: true` among them
        spec: dict[str, Any] = {
            "name": function.get("name"),
            "inputSchema": {"json": schema},
        }
        if function.get("description"):
            spec["description"] = function["description"]
        specs.append({"toolSpec": spec})
    config: dict[str, Any] = {"tools": specs}
    if choice is None or choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif choice == "required":
        config["toolChoice"] = {"any": {}}
    elif isinstance(name := _chosen(choice), str):
        config["toolChoice"] = {"tool": {"name": name}}
    else:
        raise refuse("tool_choice", f"{choice!r} has no Converse equivalent (auto, required or a function)")
    return config


def _chosen(choice: Any) -> Any:
    """The function name a `tool_choice` object names (None if it names none)."""
    function = choice.get("function") if isinstance(choice, Mapping) else None
    return function.get("name") if isinstance(function, Mapping) else None
