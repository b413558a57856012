"""OpenAI Chat Completions and Embeddings bodies as Gemini `generateContent` / `embedContent`
bodies (pure functions, no I/O): every top-level field is carried or refused, never dropped.

The request shapes are Gemini's REST reference (https://ai.google.dev/api/generate-content,
https://ai.google.dev/api/embeddings; shared/PROTOCOLS.md "Gemini"):

- `system`/`developer` messages become `systemInstruction`; `user` stays `user`, `assistant`
  becomes `model` (its `tool_calls` as `functionCall` parts); a `tool` message becomes a `user`
  turn holding a `functionResponse` named after the call it answers;
- text parts become `{text}`, `image_url` parts `inlineData` (a base64 data URL) or `fileData`
  (any other URL, its MIME type from its extension);
- `max_tokens`/`max_completion_tokens`, `temperature`, `top_p`, `top_k`, `n`, `stop`,
  `presence_penalty`, `frequency_penalty`, `seed`, `logprobs` (`responseLogprobs`) and
  `top_logprobs` (`logprobs`) go to `generationConfig`; `response_format`
  json_object / json_schema to `responseMimeType` (+ `responseSchema`); `reasoning_effort` to
  `thinkingConfig.thinkingBudget`; `tools` to `functionDeclarations`, `tool_choice` to
  `toolConfig.functionCallingConfig`.

`REFUSED` names what Gemini has no place for; a field in neither set is refused too
(`UnsupportedField`), so a new OpenAI field is never lost without a word.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.errors import UnsupportedField

KIND = "gemini"
CARRIED: frozenset[str] = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "top_k",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "response_format",
        "reasoning_effort",
        "tools",
        "tool_choice",
        "logprobs",
        "top_logprobs",
    }
)
REFUSED: Mapping[str, str] = {
    "stream": "batchgate reads whole answers; Gemini streams only at :streamGenerateContent",
    "stream_options": "batchgate reads whole answers",
    "logit_bias": "Gemini has no token bias",
    "user": "Gemini has no end-user field",
    "parallel_tool_calls": "Gemini has no switch for parallel function calls",
    "service_tier": "Gemini has no service tiers on generateContent",
    "store": "Gemini stores no completions",
    "metadata": "Gemini's generateContent has no request metadata",
    "modalities": "only text answers are translated",
    "audio": "only text answers are translated",
    "prediction": "Gemini has no predicted outputs",
    "web_search_options": "Gemini's search grounding is a tool batchgate does not translate",
    "functions": "deprecated: use tools",
    "function_call": "deprecated: use tool_choice",
}
EMBEDDING_CARRIED: frozenset[str] = frozenset({"model", "input", "dimensions", "encoding_format"})
# https://ai.google.dev/gemini-api/docs/openai#thinking: low/medium/high as thinking budgets
THINKING_BUDGETS: Mapping[str, int] = {"none": 0, "minimal": 0, "low": 1024, "medium": 8192, "high": 24576}
_TOOL_MODES: Mapping[str, str] = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
_GENERATION = (
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("top_k", "topK"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
    ("seed", "seed"),
)


def check_fields(body: Mapping[str, Any], carried: frozenset[str] = CARRIED) -> None:
    """Raise `UnsupportedField` for the first field of `body` Gemini cannot carry."""
    for name in body:
        if name in carried:
            continue
        reason = REFUSED.get(name, "not a field batchgate knows how to translate to Gemini")
        raise UnsupportedField(name, KIND, reason)


def openai_to_gemini(body: Mapping[str, Any]) -> dict[str, Any]:
    """The `generateContent` body for an OpenAI chat body (its model goes in the URL)."""
    check_fields(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise UnsupportedField("messages", KIND, "must be a non-empty list")
    system, contents = _contents(messages)
    out: dict[str, Any] = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    config = _generation_config(body)
    if config:
        out["generationConfig"] = config
    tools = body.get("tools")
    if tools is not None:
        out["tools"] = [{"functionDeclarations": _declarations(tools)}]
    choice = body.get("tool_choice")
    if choice is not None:
        out["toolConfig"] = {"functionCallingConfig": _tool_choice(choice)}
    return out


def _generation_config(body: Mapping[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        config["maxOutputTokens"] = max_tokens
    for ours, theirs in _GENERATION:
        if body.get(ours) is not None:
            config[theirs] = body[ours]
    n = body.get("n")
    if n is not None and n != 1:
        config["candidateCount"] = n
    stop = body.get("stop")
    if stop is not None:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    if body.get("logprobs"):
        config["responseLogprobs"] = True
    if body.get("top_logprobs") is not None:
        config["logprobs"] = body["top_logprobs"]
    config.update(_response_format(body.get("response_format")))
    effort = body.get("reasoning_effort")
    if effort is not None:
        if effort not in THINKING_BUDGETS:
            raise UnsupportedField(
                "reasoning_effort", KIND, f"{effort!r} is not one of {', '.join(THINKING_BUDGETS)}"
            )
        config["thinkingConfig"] = {"thinkingBudget": THINKING_BUDGETS[effort]}
    return config


def _response_format(value: Any) -> dict[str, Any]:
    """`response_format` as `responseMimeType` and, for json_schema, `responseSchema`."""
    if value is None:
        return {}
    kind = value.get("type") if isinstance(value, Mapping) else None
    if kind == "text":
        return {"responseMimeType": "text/plain"}
    if kind == "json_object":
        return {"responseMimeType": "application/json"}
    if kind == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if not isinstance(schema, Mapping):
            raise UnsupportedField("response_format", KIND, "json_schema needs json_schema.schema")
        return {"responseMimeType": "application/json", "responseSchema": dict(schema)}
    raise UnsupportedField("response_format", KIND, f"type {kind!r} is not text, json_object or json_schema")


def _declarations(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list) or not tools:
        raise UnsupportedField("tools", KIND, "must be a non-empty list")
    out: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(tool, Mapping) or tool.get("type") != "function" or not isinstance(fn, Mapping):
            raise UnsupportedField("tools", KIND, f"tools[{i}] is not a function tool")
        declaration: dict[str, Any] = {"name": fn.get("name")}
        if fn.get("description") is not None:
            declaration["description"] = fn["description"]
        if fn.get("parameters") is not None:
            declaration["parameters"] = fn["parameters"]
        out.append(declaration)
    return out


def _tool_choice(choice: Any) -> dict[str, Any]:
    if isinstance(choice, str) and choice in _TOOL_MODES:
        return {"mode": _TOOL_MODES[choice]}
    fn = choice.get("function") if isinstance(choice, Mapping) else None
    if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
        return {"mode": "ANY", "allowedFunctionNames": [fn["name"]]}
    raise UnsupportedField("tool_choice", KIND, f"{choice!r} is not auto, none, required or a function")


def _contents(messages: list[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The system texts and the `contents` turns (a tool result answers the call it names)."""
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    call_names: dict[str, str] = {}
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise UnsupportedField("messages", KIND, f"messages[{i}] must be an object")
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            parts = _parts(content, i)
            if any("text" not in p for p in parts):
                raise UnsupportedField(
                    "messages", KIND, f"messages[{i}] is a system message with non-text parts"
                )
            system.append("\n\n".join(p["text"] for p in parts))
        elif role == "user":
            contents.append({"role": "user", "parts": _parts(content, i)})
        elif role == "assistant":
            parts = _parts(content, i) if content else []
            for call in message.get("tool_calls") or []:
                fn = call.get("function", {})
                call_names[call.get("id", "")] = fn.get("name", "")
                parts.append({"functionCall": {"name": fn.get("name"), "args": _arguments(fn, i)}})
            contents.append({"role": "model", "parts": parts})
        elif role == "tool":
            name = call_names.get(message.get("tool_call_id", ""))
            if name is None:
                raise UnsupportedField("messages", KIND, f"messages[{i}] answers a tool call no message made")
            response = {"name": name, "response": _tool_result(content)}
            contents.append({"role": "user", "parts": [{"functionResponse": response}]})
        else:
            raise UnsupportedField("messages", KIND, f"messages[{i}].role {role!r} is not supported")
    if not contents:
        raise UnsupportedField("messages", KIND, "there is no user message")
    return system, contents


def _arguments(fn: Mapping[str, Any], i: int) -> Any:
    try:
        return orjson.loads(fn.get("arguments") or "{}")
    except orjson.JSONDecodeError:
        raise UnsupportedField(
            "messages", KIND, f"messages[{i}] has tool call arguments that are not JSON"
        ) from None


def _tool_result(content: Any) -> dict[str, Any]:
    """A tool message's content as the object `functionResponse.response` must be."""
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"content": text}
    return value if isinstance(value, dict) else {"content": value}


def _parts(content: Any, i: int) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    if not isinstance(content, list):
        raise UnsupportedField("messages", KIND, f"messages[{i}].content must be a string or a list of parts")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append({"text": part["text"]})
        elif kind == "image_url":
            parts.append(_image(part.get("image_url"), i))
        else:
            raise UnsupportedField("messages", KIND, f"messages[{i}] has a content part of type {kind!r}")
    return parts


def _image(spec: Any, i: int) -> dict[str, Any]:
    url = spec.get("url") if isinstance(spec, Mapping) else spec
    if not isinstance(url, str) or not url:
        raise UnsupportedField("messages", KIND, f"messages[{i}] has an image_url part without a url")
    if url.startswith("data:"):
        header, sep, data = url[5:].partition(",")
        mime, _, encoding = header.partition(";")
        if not sep or encoding != "base64" or not mime:
            raise UnsupportedField(
                "messages", KIND, f"messages[{i}] has an image data URL that is not base64"
            )
        return {"inlineData": {"mimeType": mime, "data": data}}
    guessed = mimetypes.guess_type(url)[0]
    if guessed is None:
        raise UnsupportedField(
            "messages", KIND, f"messages[{i}] has an image URL whose type its name does not tell"
        )
    return {"fileData": {"mimeType": guessed, "fileUri": url}}


def embedding_request(body: Mapping[str, Any], model: str) -> tuple[str, dict[str, Any]]:
    """(`embedContent` or `batchEmbedContents`, its body) for an OpenAI embeddings body."""
    check_fields(body, EMBEDDING_CARRIED)
    fmt = body.get("encoding_format")
    if fmt not in (None, "float", "base64"):
        raise UnsupportedField("encoding_format", KIND, f"{fmt!r} is not float or base64")
    texts = body.get("input")
    if isinstance(texts, str):
        return "embedContent", _embed_one(texts, body.get("dimensions"))
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise UnsupportedField("input", KIND, "must be a string or a list of strings (no token arrays)")
    requests = [{"model": f"models/{model}", **_embed_one(t, body.get("dimensions"))} for t in texts]
    return "batchEmbedContents", {"requests": requests}


def _embed_one(text: str, dimensions: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"content": {"parts": [{"text": text}]}}
    if dimensions is not None:
        out["outputDimensionality"] = dimensions
    return out
