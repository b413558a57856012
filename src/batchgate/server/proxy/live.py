"""The live proxy: `POST /v1/chat/completions`, `/v1/embeddings`, `/v1/responses` and
`/v1/completions` (OpenAI's shapes) and `POST /v1/messages` (Anthropic's), each request sent at
once through the service's one gateway — so through the same quota pool as every batch and job —
as an *urgent* request: it waits for quota, in-flight places and slots ahead of all batch work
(`Gateway.arun(urgent=True)`), still paced at the provider's rate, and no job's priority share
applies to it.

The request's `model` names a route of the server's config (an unknown one is a 404). The body is
checked as a batch line of its endpoint is (`batchgate.endpoints`; a 400 naming the field). The
answer is the provider's, as the gateway returns it (an OpenAI chat completion, embeddings list,
response or text completion, or the chat completion as an Anthropic `message`); with
`stream: true` a chat, Responses or Messages answer is streamed from the provider event by event
(`live_stream`; `stream_options.include_usage` is asked of the provider whatever the client
asked, and its usage chunk kept from a client that did not); embeddings and completions do not
stream (a 400). A failure is the provider's kind of
error in the client's shape (a 429 after the retries, a 502 for a provider that failed or refused
the gateway's own key, a 504 for a timeout), never a traceback or a provider key. The header
`x-batchgate-queue-ms` says how long the request waited between arrival and being sent (quota
and slots).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from batchgate.clock import Clock
from batchgate.endpoints import CHAT, COMPLETIONS, EMBEDDINGS, PATHS, RESPONSES
from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    BatchgateError,
    DispatchStopped,
    ModelRefusedError,
    NeverFitsError,
    NoTargetLeft,
    QuotaExhaustedError,
    QuotaStoreUnavailable,
    RateLimitError,
    RequestTimeout,
    RoutingError,
    ServiceRequestError,
)
from batchgate.gateway import Gateway
from batchgate.jobs.input.shapes import ShapeError, live_body
from batchgate.models import Result
from batchgate.providers.fields import route_refusal
from batchgate.providers.stream_events import Format
from batchgate.providers.stream_render import Renderer
from batchgate.server.batch_api.anthropic_api import message_of
from batchgate.server.door.request_body import json_object
from batchgate.server.proxy import live_stream

CHAT_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"
QUEUE_HEADER = "x-batchgate-queue-ms"
_MESSAGE_CHARS = 500
_SERVER = "server_error"


class LiveApi:
    """The live routes over one started gateway; see the module docstring."""

    def __init__(self, gateway: Gateway, clock: Clock) -> None:
        self.gateway, self.clock = gateway, clock
        self._models = gateway.config.route_models()  # the config is fixed for the gateway's life

    def routes(self) -> list[web.RouteDef]:
        others = [
            web.post(PATHS[e], functools.partial(self.other, e)) for e in (EMBEDDINGS, RESPONSES, COMPLETIONS)
        ]
        return [web.post(CHAT_PATH, self.chat), web.post(MESSAGES_PATH, self.messages), *others]

    async def chat(self, request: web.Request) -> web.StreamResponse:
        arrived = self.clock.now()
        raw = await json_object(request)
        stream, include_usage = _stream_options(raw)
        if stream:
            return await self._stream(request, _body(raw, anthropic=False), "chat", include_usage)
        result = await self._run(_body(raw, anthropic=False))
        answer = result.body or {}
        headers = _queue_header(result, arrived)
        return web.Response(body=orjson.dumps(answer), content_type="application/json", headers=headers)

    async def other(self, endpoint: str, request: web.Request) -> web.StreamResponse:
        """`/v1/embeddings`, `/v1/responses` or `/v1/completions`: the answer in its own shape."""
        arrived = self.clock.now()
        raw = await json_object(request)
        if endpoint == RESPONSES and raw.get("stream") is True:
            raw.pop("stream")
            return await self._stream(request, _body(raw, anthropic=False, endpoint=endpoint), "responses")
        if raw.get("stream") not in (None, False):
            raise ServiceRequestError(400, f"stream: {PATHS[endpoint]} does not stream here", param="stream")
        raw.pop("stream", None)
        result = await self._run(_body(raw, anthropic=False, endpoint=endpoint))
        headers = _queue_header(result, arrived)
        return web.Response(
            body=orjson.dumps(result.body or {}), content_type="application/json", headers=headers
        )

    async def messages(self, request: web.Request) -> web.StreamResponse:
        arrived = self.clock.now()
        raw = await json_object(request)
        stream, _ = _stream_options(raw)
        if stream:
            return await self._stream(request, _body(raw, anthropic=True), "messages")
        result = await self._run(_body(raw, anthropic=True))
        message = message_of(result.body or {}, str(raw.get("model")))
        headers = _queue_header(result, arrived)
        return web.Response(body=orjson.dumps(message), content_type="application/json", headers=headers)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], fmt: Format, include_usage: bool = True
    ) -> web.StreamResponse:
        """`body` streamed to the client in `fmt` (`live_stream`)."""
        self._known(body)
        model = str(body.get("model"))
        renderer = Renderer(fmt, include_usage=include_usage, model=model, now=self.clock.wall())
        try:
            events = self.gateway.stream_chat(body, urgent=True, relay=fmt)
            return await live_stream.relay(request, events, renderer)
        except BatchgateError as exc:  # before the first event: nothing was written
            raise refusal(exc) from None

    def _known(self, body: Mapping[str, object]) -> None:
        model = body.get("model")
        if model not in self._models:
            raise ServiceRequestError(
                404,
                f"The model {model!r} does not exist: it names no route of this server's config.",
                code="model_not_found",
                param="model",
            )
        if (refused := route_refusal(self.gateway.config, body)) is not None:  # never dropped
            raise ServiceRequestError(400, refused)

    async def _run(self, body: dict[str, Any]) -> Result:
        self._known(body)
        result = await self.gateway.arun(body, urgent=True)
        if not result.ok:
            raise refusal(result.error)
        return result


def refusal(error: BatchgateError | None) -> ServiceRequestError:
    """What a failed live request answers: the status and type its kind of failure deserves."""
    message = (error.message if error is not None else "the request failed")[:_MESSAGE_CHARS]
    kind = error.kind if error is not None else "error"
    if isinstance(error, ModelRefusedError):  # the gateway's key may not use it: not the client's
        message = "The provider refused this model to the gateway's credentials (model_not_found)"
        return ServiceRequestError(
            502, f"{message}; the server's operator must fix them.", type=_SERVER, code=kind
        )
    if isinstance(error, NeverFitsError | BadRequestError) and not isinstance(error, QuotaExhaustedError):
        return ServiceRequestError(400, message, code=kind)
    if isinstance(error, NoTargetLeft):  # the gateway's providers, not the client's request
        message = "No provider of this model can be used (its credentials refused, or unreachable)"
        return ServiceRequestError(502, f"{message}; the server's operator must fix them.", type=_SERVER)
    if isinstance(error, RoutingError):
        return ServiceRequestError(404, message, code="model_not_found", param="model")
    if isinstance(error, RateLimitError | QuotaExhaustedError):
        return ServiceRequestError(429, message, type="rate_limit_error", code=kind)
    if isinstance(error, DispatchStopped | QuotaStoreUnavailable):
        return ServiceRequestError(503, "The server is not sending requests now; try again.", type=_SERVER)
    if isinstance(error, RequestTimeout):
        return ServiceRequestError(504, "The provider did not answer in time.", type=_SERVER, code=kind)
    if isinstance(error, AuthenticationError):  # the gateway's own provider key, not the client's
        message = "The provider refused the gateway's credentials; the server's operator must fix them."
    return ServiceRequestError(502, f"The provider failed: {message}", type=_SERVER, code=kind)


def _stream_options(raw: dict[str, object]) -> tuple[bool, bool]:
    """Take `stream` and `stream_options` off the body: whether to stream, and with usage."""
    stream = raw.pop("stream", False)
    options = raw.pop("stream_options", None)
    if not isinstance(stream, bool) and stream is not None:
        raise ServiceRequestError(400, "stream: expected a boolean", param="stream")
    usage = isinstance(options, dict) and options.get("include_usage") is True
    return bool(stream), usage


def _body(raw: Mapping[str, object], *, anthropic: bool, endpoint: str = CHAT) -> dict[str, Any]:
    """The body to send to `endpoint`, checked as a batch line's is (a 400 naming the field if not)."""
    tokens = raw.get("max_tokens")
    if anthropic and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1):
        raise ServiceRequestError(400, "max_tokens: required, a positive integer", param="max_tokens")
    try:
        return live_body(raw, anthropic=anthropic, endpoint=endpoint)
    except ShapeError as exc:
        raise ServiceRequestError(400, str(exc).removeprefix("params.")) from None


def _queue_header(result: Result, arrived: float) -> dict[str, str]:
    """How long the request waited before its first attempt was sent (quota and slots), in ms."""
    if not result.attempts:
        return {}
    return {QUEUE_HEADER: f"{max(0.0, result.attempts[0].started - arrived) * 1000.0:.1f}"}
