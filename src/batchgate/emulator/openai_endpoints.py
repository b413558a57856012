"""The OpenAI family's other endpoints: `/v1/embeddings`, `/v1/responses` and the legacy
`/v1/completions` — validation, charge and answer shapes as shared/PROTOCOLS.md gives them.

- Embeddings: `input` a string, an array of ≤ 2,048 strings, or token arrays; each input ≤ 8,192
  tokens and ≤ 300,000 together; `dimensions` at most the model's own (1,536; 3,072 for
  `text-embedding-3-large`); charged on TPM by input tokens only (no output). Each vector is
  `embedding_vector(text, dimensions)`: deterministic from the text, so a test can check it.
- Responses: `input` (string or items), `instructions`, `max_output_tokens` (plays `max_tokens`
  in the charge); an answer cut at `max_output_tokens` is `status: incomplete` with
  `incomplete_details`, not an error.
- Completions: `prompt` (a string or an array of strings), `max_tokens`, `n`.
"""

from __future__ import annotations

import base64
import hashlib
import random
import struct
from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.emulator.config import ProviderConfig
from batchgate.emulator.content import answer, content_text, fit
from batchgate.emulator.limiter import RequestCost
from batchgate.emulator.openai_api import MAX_N, OpenAIFamily, _int_param, _invalid, _wrong_type, body_model
from batchgate.emulator.wire import ApiError, Family, ParsedRequest
from batchgate.emulator.wire_fields import message as unknown_message
from batchgate.emulator.wire_fields import unknown_field

PATHS = {
    "chat": "/v1/chat/completions",
    "embeddings": "/v1/embeddings",
    "responses": "/v1/responses",
    "completions": "/v1/completions",
}
MAX_EMBEDDING_INPUTS = 2048
MAX_EMBEDDING_INPUT_TOKENS = 8192
MAX_EMBEDDING_REQUEST_TOKENS = 300_000
DEFAULT_DIMENSIONS = 1536
_LARGE_DIMENSIONS = {"text-embedding-3-large": 3072}


def embedding_vector(text: str, dimensions: int) -> list[float]:
    """The emulator's embedding of `text`: a unit vector of float32 values, seeded by the text's
    SHA-256 (the same text always gets the same vector, whatever the model or the request)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    raw = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = sum(x * x for x in raw) ** 0.5 or 1.0
    packed = struct.pack(f"<{dimensions}f", *(x / norm for x in raw))
    return list(struct.unpack(f"<{dimensions}f", packed))


def token_array_text(tokens: list[int]) -> str:
    """The text a token-array input is embedded as (the emulator does not decode tokens)."""
    return "tokens:" + ",".join(str(t) for t in tokens)


def parse_for(family: Family, endpoint: str, body: Any, provider: ProviderConfig) -> ParsedRequest:
    """A body validated as the live endpoint validates it: the OpenAI family's by `endpoint`, the
    others' by their family (the live server and the Batch APIs both parse through here)."""
    if provider.refuse_unknown_fields and (name := unknown_field(body, family.name, endpoint)):
        param, code = (None, None) if family.name == "anthropic" else (name, "unknown_parameter")
        raise ApiError(
            400, "invalid_request_error", unknown_message(family.name, name), param=param, code=code
        )
    if isinstance(family, OpenAIFamily):
        return parse_request(family, endpoint, body, provider)
    return family.parse_at(endpoint, body, provider)


def answer_for(
    family: Family, req: ParsedRequest, text: str, tokens: int, cut: bool, body_id: str, wall: float
) -> bytes:
    """The answer to an admitted request in its family's and endpoint's shape (live or batch)."""
    if isinstance(family, OpenAIFamily):
        return success_body(family, req, text, tokens, cut, body_id, wall)
    return family.success_body(req, text, tokens, cut, body_id, wall)


def parse_request(family: OpenAIFamily, endpoint: str, body: Any, provider: ProviderConfig) -> ParsedRequest:
    """Validate a body sent to `endpoint` (`chat`, `embeddings`, `responses` or `completions`)."""
    if endpoint == "chat":
        return family.parse(body, provider)
    model = body_model(body)
    if body.get("stream") and endpoint != "responses":  # only chat and responses stream here
        raise _invalid("The emulator does not stream; send stream=false.", "stream", "unsupported_value")
    if provider.models is not None and model not in provider.models:
        raise family.unknown_model(model)
    family.check_access(provider, model)
    if endpoint == "embeddings":
        return _embeddings(family, model, body)
    if endpoint == "responses":
        return _responses(family, model, body, provider)
    return _completions(family, model, body, provider)


def _missing(name: str) -> ApiError:
    return _invalid(f"Missing required parameter: '{name}'.", name, "missing_required_parameter")


def _embedding_inputs(family: OpenAIFamily, value: Any) -> list[tuple[str, int]]:
    """Each input's text and tokens."""
    one_token_array = isinstance(value, list) and bool(value) and all(type(t) is int for t in value)
    if isinstance(value, str) or one_token_array:
        value = [value]
    if not isinstance(value, list) or not value:
        raise _invalid("'$.input' is invalid. Please check the API reference.", "input", "invalid_value")
    if len(value) > MAX_EMBEDDING_INPUTS:
        raise _invalid(
            f"Invalid 'input': array too long. Expected an array with maximum length "
            f"{MAX_EMBEDDING_INPUTS}, but got an array with length {len(value)} instead.",
            "input",
            "array_above_max_length",
        )
    out: list[tuple[str, int]] = []
    for item in value:
        if isinstance(item, str) and item:
            out.append((item, family.count_text(item)))
        elif isinstance(item, list) and item and all(type(t) is int and t >= 0 for t in item):
            out.append((token_array_text(item), len(item)))
        else:
            raise _invalid("'$.input' is invalid. Please check the API reference.", "input", "invalid_value")
    return out


def _embeddings(family: OpenAIFamily, model: str, body: Mapping[str, Any]) -> ParsedRequest:
    if "input" not in body:
        raise _missing("input")
    inputs = _embedding_inputs(family, body["input"])
    longest = max(tokens for _, tokens in inputs)
    if longest > MAX_EMBEDDING_INPUT_TOKENS:
        raise _invalid(
            f"This model's maximum context length is {MAX_EMBEDDING_INPUT_TOKENS} tokens, however you "
            f"requested {longest} tokens in the input. Please reduce your input.",
            "input",
            None,
        )
    total = sum(tokens for _, tokens in inputs)
    if total > MAX_EMBEDDING_REQUEST_TOKENS:
        raise _invalid(
            f"Requested {total} tokens, max {MAX_EMBEDDING_REQUEST_TOKENS} tokens per request",
            "input",
            "max_tokens_per_request",
        )
    native = _LARGE_DIMENSIONS.get(model, DEFAULT_DIMENSIONS)  # a model's vectors shorten, never grow
    dimensions = _int_param(body, "dimensions", 1, native) or native
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise _invalid(
            f"Invalid value: '{encoding}'. Supported values are: 'float' and 'base64'.",
            "encoding_format",
            "invalid_value",
        )
    texts = tuple(text for text, _ in inputs)
    return ParsedRequest(
        model=model,
        prompt=texts[0],
        max_tokens=0,
        n=1,
        prompt_tokens=total,
        cost=RequestCost(tokens=total, input_tokens=total, output_tokens=0),  # input tokens only
        fingerprint=hash(texts),
        endpoint="embeddings",
        inputs=texts,
        dimensions=dimensions,
        base64=encoding == "base64",
    )


def _response_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses `input` (and `instructions`) as chat messages, for counting and answering."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _wrong_type("instructions", "a string", instructions)
        messages.append({"role": "system", "content": instructions})
    value = body.get("input")
    if value is None:
        raise _missing("input")
    if isinstance(value, str):
        return [*messages, {"role": "user", "content": value}]
    if not isinstance(value, list):
        raise _wrong_type("input", "one of a string or array of input items", value)
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise _wrong_type(f"input[{i}]", "an object", item)
        content = item.get("content")
        if isinstance(item.get("role"), str) and isinstance(content, str | list):
            messages.append({"role": item["role"], "content": content})
    return messages


def _responses(
    family: OpenAIFamily, model: str, body: Mapping[str, Any], provider: ProviderConfig
) -> ParsedRequest:
    messages = _response_messages(body)
    max_output = _int_param(body, "max_output_tokens", 1)
    charged_max = max_output if max_output is not None else provider.default_max_tokens
    prompt_tokens = family.counter.count_prompt({"messages": messages})
    user = [m for m in messages if m["role"] == "user"]
    prompt = content_text(user[-1]["content"]) if user else ""
    return ParsedRequest(
        model=model,
        prompt=prompt,
        max_tokens=charged_max,
        n=1,
        prompt_tokens=prompt_tokens,
        # max_output_tokens plays the part of max_tokens in the charge (PROTOCOLS.md)
        cost=RequestCost(
            tokens=prompt_tokens + charged_max, input_tokens=prompt_tokens, output_tokens=charged_max
        ),
        fingerprint=hash(prompt),
        endpoint="responses",
    )


def _completions(
    family: OpenAIFamily, model: str, body: Mapping[str, Any], provider: ProviderConfig
) -> ParsedRequest:
    value = body.get("prompt")
    if value is None:
        raise _missing("prompt")
    prompts = [value] if isinstance(value, str) else value
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise _wrong_type("prompt", "a string or an array of strings", value)
    max_tokens = _int_param(body, "max_tokens", 0)
    charged_max = max_tokens if max_tokens is not None else 16  # the legacy endpoint's default
    n = _int_param(body, "n", 1, MAX_N) or 1
    prompt_tokens = sum(family.count_text(p) for p in prompts)
    output = charged_max * n * len(prompts)
    return ParsedRequest(
        model=model,
        prompt=prompts[0],
        max_tokens=charged_max,
        n=n,
        prompt_tokens=prompt_tokens,
        cost=RequestCost(tokens=prompt_tokens + output, input_tokens=prompt_tokens, output_tokens=output),
        fingerprint=hash(tuple(prompts)),
        endpoint="completions",
        inputs=tuple(prompts),
    )


def success_body(
    family: OpenAIFamily, req: ParsedRequest, text: str, tokens: int, cut: bool, body_id: str, wall: float
) -> bytes:
    """The answer to an admitted request, in its endpoint's shape."""
    if req.endpoint == "embeddings":
        return _embeddings_body(req)
    if req.endpoint == "responses":
        return _responses_body(req, text, tokens, cut, body_id, wall)
    if req.endpoint == "completions":
        return _completions_body(family, req, body_id, wall)
    return family.success_body(req, text, tokens, cut, body_id, wall)


def _embeddings_body(req: ParsedRequest) -> bytes:
    data: list[dict[str, Any]] = []
    for i, text in enumerate(req.inputs):
        vector = embedding_vector(text, req.dimensions)
        shown: Any = vector
        if req.base64:  # little-endian float32, as the SDKs decode it
            shown = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        data.append({"object": "embedding", "index": i, "embedding": shown})
    usage = {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens}
    return orjson.dumps({"object": "list", "data": data, "model": req.model, "usage": usage})


def _responses_body(
    req: ParsedRequest, text: str, tokens: int, cut: bool, body_id: str, wall: float
) -> bytes:
    message = {
        "type": "message",
        "id": "msg_" + body_id.removeprefix("chatcmpl-"),
        "status": "incomplete" if cut else "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return orjson.dumps(
        {
            "id": "resp_" + body_id.removeprefix("chatcmpl-"),
            "object": "response",
            "created_at": int(wall),
            "status": "incomplete" if cut else "completed",
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "max_output_tokens": req.max_tokens,
            "model": req.model,
            "output": [message],
            "parallel_tool_calls": True,
            "temperature": 1.0,
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "text": {"format": {"type": "text"}},
            "usage": {
                "input_tokens": req.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": req.prompt_tokens + tokens,
            },
        }
    )


def _completions_body(family: OpenAIFamily, req: ParsedRequest, body_id: str, wall: float) -> bytes:
    choices: list[dict[str, Any]] = []
    completion = 0
    for prompt in req.inputs:
        text, tokens, cut = fit(answer(prompt), req.max_tokens, family.count_text)
        for _ in range(req.n):
            finish = "length" if cut else "stop"
            choices.append({"text": text, "index": len(choices), "logprobs": None, "finish_reason": finish})
            completion += tokens
    return orjson.dumps(
        {
            "id": "cmpl-" + body_id.removeprefix("chatcmpl-"),
            "object": "text_completion",
            "created": int(wall),
            "model": req.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": req.prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": req.prompt_tokens + completion,
            },
        }
    )
