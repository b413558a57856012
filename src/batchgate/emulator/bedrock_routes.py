"""A Bedrock provider's addresses in the emulator: `POST /<name>/model/{modelId}/converse` and
`/converse-stream` (shared/PROTOCOLS.md "AWS Bedrock"), each request's SigV4 signature
checked first (`sigv4.verify`, which needs the body), then served by the emulator's one request
path (quota, faults, statistics) in the Converse shape (`bedrock_api`).

ConverseStream's answer is the Converse answer told as events in the AWS event-stream framing
(`event_stream.converse_stream`, content type `application/vnd.amazon.eventstream`); an error
before the stream starts is the same JSON error as Converse's, as Bedrock answers it
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html). An
error made by the shared request path without an AWS type gets the one its status names.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from batchgate.emulator.bedrock_api import ERROR_NAMESPACE
from batchgate.emulator.event_stream import CONTENT_TYPE, converse_stream
from batchgate.emulator.provider import EmulatedProvider
from batchgate.emulator.sigv4 import SignatureRefused, verify

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ERROR_TYPE = "x-amzn-ErrorType"
TYPES_BY_STATUS = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    413: "ValidationException",
    429: "ThrottlingException",
    503: "ServiceUnavailableException",
}
_ids = itertools.count(1)


def add_bedrock_routes(app: web.Application, rt: EmulatedProvider, handler: Callable[..., Any]) -> bool:
    """Route provider `rt`'s Converse and ConverseStream paths if it plays Bedrock (True), else
    leave it to the other families' routes (False). `handler(rt, serves=, endpoint=)` is the
    emulator's request path for one provider."""
    if rt.family.name != "bedrock":
        return False
    for action, stream in (("converse", False), ("converse-stream", True)):
        inner: Handler = handler(rt, serves=True, endpoint="chat")
        app.router.add_route("*", f"/{rt.name}/model/{{model:.+}}/{action}", _signed(rt, inner, stream))
    return True


def _signed(rt: EmulatedProvider, inner: Handler, stream: bool) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        key = rt.config.api_key
        if key is not None and request.method == "POST":
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                return await inner(request)  # the request path answers it in the family's shape
            url = f"{request.scheme}://{request.host}{request.raw_path}"
            try:
                verify(key, request.method, url, request.headers, body)
            except SignatureRefused as refused:
                rt.stats.reject("auth")
                return _refusal(rt, refused)
        response = await inner(request)
        if isinstance(response, web.Response):
            _typed(response)
            if stream and response.status == 200:
                _as_stream(response)
        return response

    return handle


def _refusal(rt: EmulatedProvider, refused: SignatureRefused) -> web.Response:
    headers = {
        "Content-Type": "application/json",
        rt.family.request_id_header: f"req-sig-{next(_ids):012x}",
        ERROR_TYPE: refused.error_type + ERROR_NAMESPACE,
    }
    return web.Response(status=403, body=orjson.dumps({"message": str(refused)}), headers=headers)


def _typed(response: web.Response) -> None:
    """An error without an AWS type (made by the shared path) gets the one its status names."""
    if response.status >= 400 and ERROR_TYPE not in response.headers:
        name = TYPES_BY_STATUS.get(response.status, "InternalServerException")
        response.headers[ERROR_TYPE] = name + ERROR_NAMESPACE


def _as_stream(response: web.Response) -> None:
    """A 200 Converse answer rewritten as its ConverseStream body (a garbled one left as it is:
    the `truncated` and `non_json` faults garble the stream too)."""
    raw = response.body
    if not isinstance(raw, bytes):
        return
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    response.body = converse_stream(answer)
    response.headers["Content-Type"] = CONTENT_TYPE
