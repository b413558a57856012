"""Input line shapes, normalised to one OpenAI body (chat, or the endpoint a batch line's `url`
names: embeddings, responses, completions — see `batchgate.endpoints`).

Accepted: the OpenAI Batch API line (`{custom_id, method, url, body}`), the Anthropic Message
Batches line (`{custom_id, params}`) and a plain line (`{custom_id?, model, messages | prompt, ...}`,
the other keys being body fields). Top-level `error` and `batchgate` keys are ignored, so lines of
an errors file can be fed back as input. Problems raise `ShapeError` with a one-line reason.

Per-task metadata: a batch line's other top-level fields (`bizObjectId`, ...), and a plain line's
`metadata`, are not request fields: they are kept with the task (under `TASK_METADATA` in its
stored body, never sent) and written back, as given, on its OUT line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.endpoints import CHAT, ENDPOINT_KEY, MESSAGES_PARAMS, PATHS, endpoint_for_url, request_problem
from batchgate.messages_in import MessagesShapeError, messages_to_chat
from batchgate.request_fields import OUT_LINE_KEYS, OWN_FIELDS, TASK_METADATA

IGNORED_KEYS = frozenset({"error", "batchgate"})
OPENAI_LINE_KEYS = frozenset({"custom_id", "method", "url", "body"})
ANTHROPIC_LINE_KEYS = frozenset({"custom_id", "params"})
PLAIN_METADATA = "metadata"  # a plain line's metadata (its other keys are body fields)
_MAX_ID = 512


class ShapeError(ValueError):
    """A JSON object that is not an acceptable input line; the message is the reason."""


def normalise(
    obj: Mapping[str, object], line_no: int, *, any_model: bool = False
) -> tuple[str, dict[str, Any]]:
    """`(custom_id, body)` for one parsed input line (its values unchecked; the body passes on to
    a provider as it is); with `any_model` (a fan-out, whose routes set the model) the line's
    model is optional and taken off."""
    if "params" in obj:
        custom_id = _custom_id(obj, required=True, line_no=line_no)
        body = _from_anthropic(obj["params"])
        meta = _line_metadata(obj, ANTHROPIC_LINE_KEYS)
    elif "body" in obj or "url" in obj or "method" in obj:
        custom_id = _custom_id(obj, required=True, line_no=line_no)
        body = _from_openai_batch(obj)
        meta = _line_metadata(obj, OPENAI_LINE_KEYS)
    else:
        custom_id = _custom_id(obj, required=False, line_no=line_no)
        body = _from_plain(obj)
        meta = {PLAIN_METADATA: body.pop(PLAIN_METADATA)} if PLAIN_METADATA in body else {}
    if not OWN_FIELDS.isdisjoint(body):  # batchgate's own: never sent to a provider
        for key in OWN_FIELDS.intersection(body):
            del body[key]
    if meta:
        body[TASK_METADATA] = meta
    if any_model:
        body.pop("model", None)
    _check_body(body, any_model=any_model)
    return custom_id, body


def _line_metadata(obj: Mapping[str, object], request_keys: frozenset[str]) -> dict[str, object]:
    """A batch line's top-level fields that are not request fields (nor ignored ones)."""
    meta = {k: v for k, v in obj.items() if k not in request_keys and k not in IGNORED_KEYS}
    for key in sorted(OUT_LINE_KEYS.intersection(meta)):
        raise ShapeError(f"top-level field {key!r} would clash with the output line's own {key!r}; rename it")
    return meta


def live_body(obj: Mapping[str, object], *, anthropic: bool, endpoint: str = CHAT) -> dict[str, Any]:
    """The body of one live request to `endpoint` (`batchgate serve`'s proxy): an OpenAI body as
    it is, or Anthropic Messages params translated as a batch line's are; checked the same way.
    The endpoint is the route's, never the body's (an `ENDPOINT_KEY` in it is dropped). `stream`
    is the caller's to take off first."""
    body = _from_anthropic(obj) if anthropic else {k: v for k, v in obj.items() if k != ENDPOINT_KEY}
    for key in OWN_FIELDS.intersection(body):
        del body[key]
    if endpoint != CHAT:
        body[ENDPOINT_KEY] = endpoint
    _check_body(body)
    return body


def _custom_id(obj: Mapping[str, object], *, required: bool, line_no: int) -> str:
    value = obj.get("custom_id")
    if value is None:
        if required:
            raise ShapeError("missing custom_id")
        return f"line-{line_no}"
    if not isinstance(value, str) or not value:
        raise ShapeError("custom_id must be a non-empty string")
    if len(value) > _MAX_ID:
        raise ShapeError(f"custom_id is longer than {_MAX_ID} characters")
    return value


def _from_openai_batch(obj: Mapping[str, object]) -> dict[str, Any]:
    method = obj.get("method")
    if not isinstance(method, str) or method.upper() != "POST":
        raise ShapeError(f"method must be POST, got {method!r}")
    url = obj.get("url")
    endpoint = endpoint_for_url(url) if isinstance(url, str) else None
    if endpoint is None:
        raise ShapeError(f"url must be one of {', '.join(PATHS.values())}, got {url!r}")
    body = obj.get("body")
    if not isinstance(body, dict):
        raise ShapeError("body must be a JSON object")
    body = {k: v for k, v in body.items() if k != ENDPOINT_KEY}
    if endpoint != CHAT:
        body[ENDPOINT_KEY] = endpoint
    return body


def _from_plain(obj: Mapping[str, object]) -> dict[str, Any]:
    # a copy in C, then the few keys dropped: a comprehension costs more a line
    body: dict[str, Any] = dict(obj)
    body.pop("custom_id", None)
    if not IGNORED_KEYS.isdisjoint(body):
        for key in IGNORED_KEYS:
            body.pop(key, None)
    if "prompt" in body:
        if "messages" in body:
            raise ShapeError("give either messages or prompt, not both")
        prompt = body.pop("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise ShapeError("prompt must be a non-empty string")
        body["messages"] = [{"role": "user", "content": prompt}]
    return body


def _from_anthropic(params: object) -> dict[str, Any]:
    """The OpenAI body Messages params mean, the params kept whole beside it (an Anthropic target is
    sent them as given; what another target cannot carry is refused at validation: `fields`)."""
    try:
        body = messages_to_chat(params)
    except MessagesShapeError as exc:
        raise ShapeError(str(exc)) from None
    body[MESSAGES_PARAMS] = params
    return body


def _check_body(body: Mapping[str, object], *, any_model: bool = False) -> None:
    model = body.get("model")
    if model is None and not any_model:
        raise ShapeError("missing model")
    if not any_model and (not isinstance(model, str) or not model):
        raise ShapeError("model must be a non-empty string")
    if body.get("stream"):
        raise ShapeError("stream is not supported in batch input")
    problem = request_problem(body)  # the same check the Gateway makes before sending
    if problem is not None:
        raise ShapeError(problem)
