"""One streamed call to a provider: the request its client would send with `stream: true` (chat
asks `stream_options.include_usage`, so the quota is settled from the provider's own count
whatever the client asked; Gemini's is `:streamGenerateContent?alt=sse`, Bedrock's ConverseStream
signed as Converse is, each with the chat body a chat or Responses request means), sent over the
provider client's lean HTTP/1.1 transport (`providers.h1`, `H1Transport.stream`), its events read
as they arrive (Bedrock's binary frames by `bedrock_stream.FrameDecoder`, the others' SSE by
`stream_events.Decoder`), tool calls among them (`stream_tools`; the forced tool through which a
JSON `response_format` was asked of Anthropic or Bedrock read as the answer's text, as an answer
read whole is).

`open_stream` returns once the provider answered 2xx with its headers (a non-2xx: the
`ProviderError` its status means, `classify.error_for_response`; a transport failure: the
`TransportError` `classify.error_for_exception` makes, never with the key). `UpstreamStream.next`
gives the next event, or raises `RequestTimeout` when none came within `idle` seconds (a stalled
stream: an error, not a hang) and `MalformedResponse` when the stream broke off before its end.
`close` ends the call (the connection is dropped: the provider stops generating; one read to its
end goes back to the pool).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any
from urllib.parse import quote

import orjson

from batchgate.config import Secret
from batchgate.endpoints import CHAT, RESPONSES, endpoint_of, wire_body
from batchgate.errors import BadRequestError, MalformedResponse, RequestTimeout, UnsupportedField
from batchgate.providers.anthropic import _TRANSLATE, AnthropicClient
from batchgate.providers.bedrock import REQUEST_ID, BedrockClient, bedrock_error, stream_exception
from batchgate.providers.bedrock_stream import FrameDecoder, StreamFailure
from batchgate.providers.bedrock_translate import openai_to_converse, output_tool
from batchgate.providers.classify import error_for_exception, error_for_response
from batchgate.providers.gemini import GeminiClient, model_path
from batchgate.providers.gemini_translate import openai_to_gemini
from batchgate.providers.h1 import H1Transport
from batchgate.providers.h1.errors import H1Error
from batchgate.providers.h1.stream import H1Stream
from batchgate.providers.openai import OpenAIClient
from batchgate.providers.responses_translate import responses_as_chat
from batchgate.providers.sse import SSEError, SSEReader
from batchgate.providers.stream_events import Decoder, Format, StreamEvent, StreamFailed
from batchgate.providers.translate import openai_to_anthropic
from batchgate.providers.translate_tools import RESPONSE_TOOL
from batchgate.trace_hooks import TRACEPARENT
from batchgate.urls import joined

# identity: a stream's bytes are read as they come, never decompressed
_STREAM_HEADERS = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
_EVENT_STREAM = {"Accept": "application/vnd.amazon.eventstream", "Accept-Encoding": "identity"}
_ERROR_BODY = 1024 * 1024  # what of a refusal's body is read
_URLS: dict[tuple[str, str, str, str], str] = {}  # (provider, base URL, path, model) -> the URL


Request = tuple[str, dict[str, str], bytes, Format, str | None]


def stream_request(client: Any, body: dict[str, Any], model: str) -> Request:
    """(url, headers, body bytes, event format, the forced tool of a JSON answer or None) of
    `body` streamed by `client` for `model`."""
    if isinstance(client, AnthropicClient):
        endpoint = endpoint_of(body)
        to_messages, _ = _TRANSLATE.get(endpoint, (openai_to_anthropic, None))
        default = client._default_max_tokens
        request = to_messages(body, model=model, default_max_tokens=default, provider=client.name)
        request["stream"] = True
        headers = {**client._headers, **_STREAM_HEADERS}
        return client._url, headers, orjson.dumps(request), "messages", _forced(endpoint, request)
    if isinstance(client, OpenAIClient):
        endpoint = endpoint_of(body)
        if endpoint not in (CHAT, RESPONSES):
            raise BadRequestError(f"{client.name}: {endpoint} does not stream", provider=client.name)
        path, payload = wire_body(body)
        payload["model"] = client.wire_model(model)
        payload["stream"] = True
        if endpoint == CHAT:
            payload["stream_options"] = {"include_usage": True}
        fmt: Format = "chat" if endpoint == CHAT else "responses"
        where = (client.name, client.base_url, path, model)  # made once: `urls.joined` parses
        url = _URLS.get(where) or _URLS.setdefault(where, client.url(path, model))
        return url, {**client._headers, **_STREAM_HEADERS}, orjson.dumps(payload), fmt, None
    if isinstance(client, GeminiClient):  # the Vertex AI token is added by `open_stream`
        request = _translated(client.name, openai_to_gemini, _chat_payload(client.name, body))
        path = f"{model_path(client._config, model)}:streamGenerateContent?alt=sse"
        url = joined(client.base_url, path)
        return url, {**client._headers, **_STREAM_HEADERS}, orjson.dumps(request), "gemini", None
    if isinstance(client, BedrockClient):
        payload = _chat_payload(client.name, body)
        to_converse = partial(openai_to_converse, default_max_tokens=client._default_max_tokens)
        converse = _translated(client.name, to_converse, payload)
        url = joined(client.base_url, f"model/{quote(model, safe=':')}/converse-stream")
        data = orjson.dumps(converse)
        headers = client._signer.sign("POST", url, data, {**client._headers, **_EVENT_STREAM})
        return url, headers, data, "bedrock", output_tool(payload)
    kind = getattr(client, "kind", type(client).__name__)
    raise BadRequestError(
        f"{client.name}: a {kind} target does not stream here (send the request without stream: true)",
        provider=client.name,
    )


def _forced(endpoint: str, request: dict[str, Any]) -> str | None:
    """The tool a Messages request was forced through for a JSON answer: chat's `response_format`
    (`translate_tools.RESPONSE_TOOL`) or a Responses body's `text.format` (its only tool)."""
    choice = request.get("tool_choice")
    name = choice.get("name") if isinstance(choice, dict) and choice.get("type") == "tool" else None
    if endpoint == RESPONSES or (endpoint == CHAT and name == RESPONSE_TOOL):
        return name if isinstance(name, str) else None
    return None


def _chat_payload(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    """The chat body (without `stream`: the address streams) a chat or Responses body means."""
    endpoint = endpoint_of(body)
    if endpoint not in (CHAT, RESPONSES):
        raise BadRequestError(f"{provider}: {endpoint} does not stream", provider=provider)
    payload = wire_body(body)[1]
    if endpoint == RESPONSES:
        return responses_as_chat(payload, provider=provider)
    payload.pop("stream", None)
    payload.pop("stream_options", None)
    return payload


def _translated(
    provider: str, translate: Callable[[dict[str, Any]], dict[str, Any]], payload: dict[str, Any]
) -> dict[str, Any]:
    try:
        return translate(payload)
    except UnsupportedField as exc:
        raise BadRequestError(f"{provider}: {exc}", provider=provider) from None


class UpstreamStream:
    """An answer being streamed; see the module docstring."""

    def __init__(
        self, body: H1Stream, fmt: Format, idle: float, provider: str, key: Secret | None,
        relay: Format | None = None, url: str = "", answer_tool: str | None = None,
    ) -> None:  # fmt: skip
        self._body = body
        self.headers: Mapping[str, str] = body.headers
        self.status = body.status
        self.fmt = fmt
        self._idle = idle
        self._provider = provider
        self._key = key
        self._reader = SSEReader()
        # relayed as they are: parsed as needed
        self._decoder = Decoder(fmt, light=fmt == relay, answer_tool=answer_tool)
        # Bedrock's binary frames, not SSE; the stream's id its request id, as Converse's answer's
        rid = body.headers.get(REQUEST_ID)
        self._frames = FrameDecoder(rid, answer_tool) if fmt == "bedrock" else None
        self._ready: list[StreamEvent] = []
        self._ended = False
        self._url = url

    async def next(self) -> StreamEvent | None:
        """The next event (None: the stream ended after its last event)."""
        while not self._ready:
            if self._ended:
                return None
            try:  # the stream's one idle timer bounds each wait
                chunk = await self._body.read()
            except TimeoutError:
                message = f"{self._provider}: no event within {self._idle:g} s (stream_idle)"
                raise RequestTimeout(message, provider=self._provider) from None
            except (H1Error, OSError) as exc:
                raise error_for_exception(exc, provider=self._provider, api_key=self._key) from None
            if not chunk:
                self._ended = True
                if not (self._decoder.ended or (self._frames is not None and self._frames.ended)):
                    message = f"{self._provider}: the stream broke off"
                    raise MalformedResponse(message, provider=self._provider)
                return None
            try:
                if self._frames is not None:
                    self._ready = self._frames.feed(chunk)
                else:
                    self._ready = self._decoder.decode_read(self._reader, chunk)
            except (SSEError, StreamFailed) as exc:
                raise MalformedResponse(f"{self._provider}: {exc}", provider=self._provider) from None
            except StreamFailure as exc:  # Bedrock's exception frame: the error its type names
                raise stream_exception(self._provider, self.status, self.headers, exc, self._url) from None
            self._ready.reverse()
        event = self._ready.pop()
        event.more = bool(self._ready)
        return event

    def close(self) -> None:
        """End the call: a stream read to its end gives its connection back to the pool; one
        left midway drops it (the provider's handler is cancelled: it stops generating)."""
        self._body.close()


async def open_stream(
    transport: H1Transport,
    client: Any,
    body: dict[str, Any],
    model: str,
    *,
    connect: float,
    idle: float,
    relay: Format | None = None,
) -> UpstreamStream:
    """Send `body` streamed; the stream once the provider answered 2xx (see the module docstring).
    `relay`: the format the caller passes on as it is (its events decoded lightly)."""
    url, headers, data, fmt, answer_tool = stream_request(client, body, model)
    if isinstance(client, GeminiClient) and client._token is not None:  # Vertex AI's bearer token
        headers = {**headers, "Authorization": await client._token.header()}
    if (traceparent := TRACEPARENT.get()) is not None:  # tracing on: the trace goes on upstream
        headers = {**headers, "traceparent": traceparent}
    name, key = client.name, getattr(client, "_api_key", None)
    try:
        stream = await transport.stream("POST", url, data, headers, connect=connect, idle=idle)
    except (H1Error, TimeoutError, OSError) as exc:
        raise error_for_exception(exc, provider=name, api_key=key) from None
    if not 200 <= stream.status < 300:
        raw = b""
        try:
            while len(raw) < _ERROR_BODY and (piece := await stream.read()):
                raw += piece
        except (H1Error, TimeoutError, OSError):
            pass
        finally:
            stream.close()
        if fmt == "bedrock":  # named by its `x-amzn-ErrorType`
            raise bedrock_error(stream.status, stream.headers, raw, provider=name, url=url)
        raise error_for_response(stream.status, stream.headers, raw, provider=name, api_key=key, url=url)
    if stream.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
        stream.close()
        message = f"{name}: the stream came compressed, though identity was asked"
        raise MalformedResponse(message, provider=name)
    return UpstreamStream(stream, fmt, idle, name, key, relay, url, answer_tool)
