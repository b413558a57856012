"""Gemini answers back in OpenAI's shapes (pure functions, no I/O): a `GenerateContentResponse` as
a `chat.completion`, an `embedContent` / `batchEmbedContents` answer as an embeddings list.

Per https://ai.google.dev/api/generate-content: each candidate becomes a choice (its text parts
joined, `thought` parts left out, `functionCall` parts as `tool_calls`), `finishReason` is mapped
(`FINISH_REASONS`; a choice with tool calls finishes `tool_calls`), a prompt blocked before any
candidate is one `content_filter` choice. `usageMetadata` becomes usage: prompt tokens include the
cached ones (`cachedContentTokenCount`, reported as `cached_tokens`), completion tokens include the
thinking ones (`thoughtsTokenCount`, reported as `reasoning_tokens`), as OpenAI counts them; a
candidate's `logprobsResult` becomes its choice's `logprobs.content`.
A body that is not such an answer raises `ValueError`.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping
from typing import Any

import orjson

FINISH_REASONS: Mapping[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
}


def gemini_to_openai(resp: Mapping[str, Any], *, model: str, created: int) -> dict[str, Any]:
    """The OpenAI `chat.completion` body for a Gemini `generateContent` answer."""
    candidates = resp.get("candidates") or []
    if not isinstance(candidates, list):
        raise ValueError("'candidates' is not a list")
    choices = [_choice(i, c) for i, c in enumerate(candidates)]
    if not choices:
        feedback = resp.get("promptFeedback")
        if not isinstance(feedback, Mapping) or not feedback.get("blockReason"):
            raise ValueError("no candidates and no promptFeedback.blockReason")
        choices = [_blocked()]
    version = resp.get("modelVersion")
    return {
        "id": resp.get("responseId") or f"gemini-{created}",
        "object": "chat.completion",
        "created": created,
        "model": version if isinstance(version, str) and version else model,
        "choices": choices,
        "usage": usage_of(resp.get("usageMetadata")),
    }


def _blocked() -> dict[str, Any]:
    message = {"role": "assistant", "content": None}
    return {"index": 0, "message": message, "finish_reason": "content_filter", "logprobs": None}


def _choice(i: int, candidate: Any) -> dict[str, Any]:
    if not isinstance(candidate, Mapping):
        raise ValueError("a candidate is not an object")
    content = candidate.get("content") or {}
    parts = content.get("parts") or [] if isinstance(content, Mapping) else None
    if not isinstance(parts, list):
        raise ValueError("a candidate's content.parts is not a list")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, Mapping):
            raise ValueError("a part is not an object")
        if isinstance(part.get("functionCall"), Mapping):
            calls.append(tool_call(i, len(calls), part["functionCall"]))
        elif isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    reason = candidate.get("finishReason")
    finish = (
        "tool_calls" if calls else FINISH_REASONS.get(reason, "stop") if isinstance(reason, str) else None
    )
    logprobs = _logprobs(candidate.get("logprobsResult"))
    index = candidate.get("index", i)
    return {
        "index": index if isinstance(index, int) else i,
        "message": message,
        "finish_reason": finish,
        "logprobs": logprobs,
    }


def _logprobs(result: Any) -> dict[str, Any] | None:
    """Gemini's `logprobsResult` (chosen tokens, each step's top candidates) as OpenAI's
    `logprobs.content`; None when the answer has none."""
    if not isinstance(result, Mapping):
        return None
    chosen = result.get("chosenCandidates") or []
    tops = result.get("topCandidates") or []
    content = []
    for step, token in enumerate(chosen):
        top = tops[step].get("candidates", []) if step < len(tops) and isinstance(tops[step], Mapping) else []
        content.append({**_token(token), "top_logprobs": [_token(t) for t in top]})
    return {"content": content, "refusal": None}


def _token(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
        raise ValueError("a logprobs candidate has no token")
    text = entry["token"]
    return {"token": text, "logprob": float(entry.get("logProbability", 0.0)), "bytes": list(text.encode())}


def tool_call(choice: int, n: int, call: Mapping[str, Any]) -> dict[str, Any]:
    """A `functionCall` part as OpenAI's tool call (its id, or `call_{choice}_{n}`; a stream's too)."""
    call_id = call.get("id")
    return {
        "id": call_id if isinstance(call_id, str) and call_id else f"call_{choice}_{n}",
        "type": "function",
        "function": {"name": call.get("name"), "arguments": orjson.dumps(call.get("args") or {}).decode()},
    }


def usage_of(meta: Any) -> dict[str, Any]:
    """OpenAI's usage object for Gemini's `usageMetadata` (absent counts are 0)."""
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise ValueError("'usageMetadata' is not an object")
    prompt = _count(meta, "promptTokenCount") + _count(meta, "toolUsePromptTokenCount")
    thoughts = _count(meta, "thoughtsTokenCount")
    completion = _count(meta, "candidatesTokenCount") + thoughts
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": _count(meta, "cachedContentTokenCount")},
        "completion_tokens_details": {"reasoning_tokens": thoughts},
    }


def _count(meta: Mapping[str, Any], name: str) -> int:
    value = meta.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usageMetadata.{name} is not a non-negative integer")
    return value


def embeddings_to_openai(resp: Mapping[str, Any], *, model: str, base64_floats: bool) -> dict[str, Any]:
    """OpenAI's embeddings list for an `embedContent` (`embedding`) or `batchEmbedContents`
    (`embeddings`) answer; `base64_floats`: each vector as little-endian float32 in base64."""
    vectors = [resp["embedding"]] if "embedding" in resp else resp.get("embeddings")
    if not isinstance(vectors, list) or not vectors:
        raise ValueError("no 'embedding' nor 'embeddings'")
    data: list[dict[str, Any]] = []
    for i, vector in enumerate(vectors):
        values = vector.get("values") if isinstance(vector, Mapping) else None
        if not isinstance(values, list):
            raise ValueError("an embedding has no 'values' list")
        shown: Any = (
            base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode() if base64_floats else values
        )
        data.append({"object": "embedding", "index": i, "embedding": shown})
    usage = usage_of(resp.get("usageMetadata"))
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": usage["prompt_tokens"], "total_tokens": usage["prompt_tokens"]},
    }
