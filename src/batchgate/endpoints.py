"""The OpenAI endpoints a request may name — chat, embeddings, the Responses API and legacy
completions — and what each accepts, checked before anything is sent.

A batch line's `url` picks the endpoint; a body for any endpoint but chat carries it under
`ENDPOINT_KEY` (batchgate's own key, stored with the task and taken off before sending), so every
layer that sees the body — counting, pricing, the client — knows where it goes. A request given to
the Python API (`Gateway.arun`, …) names its endpoint the same way, with a `url` key. Shapes as
shared/PROTOCOLS.md gives them: embeddings `input` is a string, ≤ 2,048 strings or token
arrays; Responses `input` is a string or a list of items; completions `prompt` is a string or a
list of strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.body_types import body_problem, field_type_problem, json_type

CHAT = "chat"
EMBEDDINGS = "embeddings"
RESPONSES = "responses"
COMPLETIONS = "completions"
ENDPOINT_KEY = "batchgate:endpoint"  # not a field any provider has: a colon is never in one
# An Anthropic-shaped line's params, kept whole beside their OpenAI translation: an Anthropic target
# is sent them as given (nothing removed); other targets the translation (`messages_in`)
MESSAGES_PARAMS = "batchgate:messages"
PATHS = {
    CHAT: "/v1/chat/completions",
    EMBEDDINGS: "/v1/embeddings",
    RESPONSES: "/v1/responses",
    COMPLETIONS: "/v1/completions",
}
MAX_EMBEDDING_INPUTS = 2048
_WIRE_PATHS = {endpoint: path.removeprefix("/v1/") for endpoint, path in PATHS.items()}


def endpoint_of(body: Mapping[str, object]) -> str:
    """The endpoint a body goes to (chat unless it says otherwise)."""
    value = body.get(ENDPOINT_KEY)
    return value if isinstance(value, str) and value in PATHS else CHAT


def endpoint_for_url(url: str) -> str | None:
    """The endpoint a batch line's `url` names (`/v1/embeddings`, …), or None."""
    path = url.rstrip("/")
    if path.endswith("/chat/completions"):
        return CHAT
    for endpoint, full in PATHS.items():
        if path.endswith(full.removeprefix("/v1")):
            return endpoint
    return None


def with_endpoint(request: Mapping[str, Any]) -> dict[str, Any]:
    """A Python API request's body: a `url` naming an endpoint (`/v1/embeddings`, …) becomes the
    body's endpoint; an unknown `url` stays, for `request_problem` to refuse."""
    body = dict(request)
    url = body.get("url")
    endpoint = endpoint_for_url(url) if isinstance(url, str) else None
    if endpoint is not None:
        del body["url"]
        body.pop(ENDPOINT_KEY, None)
        if endpoint != CHAT:
            body[ENDPOINT_KEY] = endpoint
    return body


def wire_body(body: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """`(path under /v1, payload)`: where a body is sent and what is sent (no batchgate key)."""
    payload = dict(body)
    endpoint = payload.pop(ENDPOINT_KEY, CHAT)
    payload.pop(MESSAGES_PARAMS, None)
    path = _WIRE_PATHS.get(endpoint) if isinstance(endpoint, str) else None
    return path or _WIRE_PATHS[CHAT], payload


def request_problem(body: Mapping[str, object]) -> str | None:
    """What is wrong with a body for its endpoint, as one line (None: fine)."""
    if "url" in body:  # only left on a body by `with_endpoint` when it names no endpoint
        return f"url must be one of {', '.join(PATHS.values())}, got {body['url']!r}"
    endpoint = endpoint_of(body)
    if endpoint == CHAT:
        return body_problem(body)
    if "messages" in body:
        return f"messages is a chat field; {PATHS[endpoint]} does not take it"
    check = {EMBEDDINGS: _embeddings_problem, RESPONSES: _responses_problem}.get(
        endpoint, _completions_problem
    )
    return check(body) or field_type_problem(body)


def _positive_int(body: Mapping[str, object], name: str) -> str | None:
    value = body.get(name)
    if value is None or (type(value) is int and value >= 1):
        return None
    return f"{name} must be an integer >= 1, got {value!r}"


def _embeddings_problem(body: Mapping[str, object]) -> str | None:
    problem = _embeddings_input_problem(body.get("input"))
    if problem is not None:
        return problem
    encoding = body.get("encoding_format")
    if encoding is not None and encoding not in ("float", "base64"):
        return f"encoding_format must be float or base64, got {encoding!r}"
    return _positive_int(body, "dimensions")


def _embeddings_input_problem(value: object) -> str | None:
    shape = "input must be a non-empty string, an array of strings or token arrays"
    if isinstance(value, str):
        return None if value else f"{shape}, got an empty string"
    if not isinstance(value, list) or not value:
        return f"{shape}, got {_kind(value)}"
    if len(value) > MAX_EMBEDDING_INPUTS:
        return f"input holds {len(value)} items; at most {MAX_EMBEDDING_INPUTS} in one request"
    if all(type(t) is int and t >= 0 for t in value):
        return None  # one token array
    for i, item in enumerate(value):
        text = isinstance(item, str) and bool(item)
        tokens = isinstance(item, list) and bool(item) and all(type(t) is int and t >= 0 for t in item)
        if not (text or tokens):
            return f"input[{i}] must be a non-empty string or token array, got {_kind(item)}"
    return None


def _responses_problem(body: Mapping[str, object]) -> str | None:
    value = body.get("input")
    if isinstance(value, str):
        if not value:
            return "input must be a non-empty string or list of items, got an empty string"
    elif not isinstance(value, list) or not value or not all(isinstance(i, dict) for i in value):
        return f"input must be a non-empty string or list of items (objects), got {_kind(value)}"
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        return f"instructions must be a string, got {_kind(instructions)}"
    return _positive_int(body, "max_output_tokens")


def _completions_problem(body: Mapping[str, object]) -> str | None:
    value = body.get("prompt")
    if isinstance(value, str) and value:
        return None
    if isinstance(value, list) and value and all(isinstance(p, str) for p in value):
        return None
    return f"prompt must be a non-empty string or array of strings, got {_kind(value)}"


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    return "an empty array" if value == [] else json_type(value)
