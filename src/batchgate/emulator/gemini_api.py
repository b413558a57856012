"""Gemini's wire (AI Studio and Vertex AI): `generateContent`, `streamGenerateContent` (its
`alt=sse` events, played by `emulator.streaming`), `embedContent` and `batchEmbedContents` at
Google's addresses, the `x-goog-api-key` header, Google's error body and
its 429 `RESOURCE_EXHAUSTED` with the wait in `RetryInfo.retryDelay`.

Rules, each from shared/PROTOCOLS.md "Gemini" and Google's references
(https://ai.google.dev/api/generate-content, https://ai.google.dev/api/embeddings,
https://ai.google.dev/gemini-api/docs/rate-limits, https://cloud.google.com/apis/design/errors):

- Addresses under `/<name>`: `/v1beta/models/{model}:{action}` and `/v1/...` (AI Studio) and
  `/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:{action}` (Vertex AI); the
  model is the path's, an action not in `ACTIONS` is a 404 `NOT_FOUND`.
- The key: `x-goog-api-key`; none is a 403 `PERMISSION_DENIED` ("unregistered
  callers"), a wrong one a 400 `INVALID_ARGUMENT` whose `ErrorInfo.reason` is `API_KEY_INVALID`;
  an `Authorization: Bearer` token (Vertex AI's OAuth token) is accepted by its presence.
- Errors: `{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT", "details": [...]}}`.
- Limits per model per project: RPM and TPM, input tokens only (`tokens` is charged the prompt);
  a 429 is `RESOURCE_EXHAUSTED` with a `QuotaFailure` (its per-minute `quotaId`) and a `RetryInfo`
  `retryDelay` ("34s"), and no `retry-after` header; no answer carries rate-limit headers. The
  `insufficient_quota` fault plays a day's requests used up (RPD): a `QuotaFailure` whose `quotaId`
  is `GenerateRequestsPerDayPerProjectPerModel`, no `RetryInfo`.
- Tokens: about four characters a token (ceil(chars / 4)), Gemini's documented rule of thumb.
- A request that forces a function (`toolConfig.functionCallingConfig.mode` ANY) is answered with
  a `functionCall` part of that function (empty `args`).
- A body field the wire does not know (`ACCEPTED_FIELDS`) is refused with Google's protobuf words
  when the provider sets `refuse_unknown_fields`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from batchgate.emulator.config import ProviderConfig
from batchgate.emulator.content import content_text
from batchgate.emulator.gemini_body import check_ranges, forced_call
from batchgate.emulator.limiter import DimensionState, RequestCost
from batchgate.emulator.openai_endpoints import embedding_vector
from batchgate.emulator.wire import ApiError, Family, ParsedRequest

if TYPE_CHECKING:
    from batchgate.emulator.provider import EmulatedProvider

Serve = Callable[["EmulatedProvider", web.Request, bool, str], Awaitable[web.StreamResponse]]

CHARS_PER_TOKEN = 4
EMBED_DIMENSIONS = 768  # text-embedding-004's vectors
ACCEPTED_FIELDS: frozenset[str] = frozenset(
    {
        "contents",
        "systemInstruction",
        "system_instruction",
        "generationConfig",
        "generation_config",
        "tools",
        "toolConfig",
        "tool_config",
        "safetySettings",
        "safety_settings",
        "cachedContent",
        "cached_content",
        "labels",
    }
)
EMBED_FIELDS: frozenset[str] = frozenset(
    {"model", "content", "taskType", "title", "outputDimensionality", "requests"}
)
ACTIONS = {
    "generateContent": "chat",
    "streamGenerateContent": "chat",  # answered as SSE chunks (`emulator.streaming`: alt=sse's wire)
    "embedContent": "embed",
    "batchEmbedContents": "embeddings",
}
STUDIO_PATHS = ("/v1beta/models/{target}", "/v1/models/{target}")  # google-genai 3.x sends v1
VERTEX_PATH = "/v1/projects/{project}/locations/{location}/publishers/google/models/{target}"
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def add_gemini_routes(app: web.Application, rt: EmulatedProvider, serve: Serve) -> None:
    """Provider `rt`'s Gemini addresses (AI Studio's and Vertex AI's), each action to its endpoint."""

    async def handle(request: web.Request) -> web.StreamResponse:
        action = request.match_info["target"].rpartition(":")[2]
        return await serve(rt, request, True, ACTIONS.get(action, "chat"))

    for path in (*STUDIO_PATHS, VERTEX_PATH):
        app.router.add_route("*", f"/{rt.name}{path}", handle)


def count_text(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)


def split_target(target: str) -> tuple[str, str]:
    """(model, endpoint) of a path's `{model}:{action}`; a 404 for an action Gemini has not."""
    model, sep, action = target.rpartition(":")
    if not sep or not model or action not in ACTIONS:
        raise ApiError(404, "NOT_FOUND", f"Method not found: {action or target}", reason="not_found")
    return model, ACTIONS[action]


def _text(parts: Any, where: str) -> str:
    if not isinstance(parts, list) or not parts:
        raise _invalid(f"* GenerateContentRequest.{where}.parts: contents.parts must not be empty.")
    return content_text(
        [{"type": "text", "text": p["text"]} for p in parts if isinstance(p, dict) and "text" in p]
    )


class GeminiFamily(Family):
    """Gemini's bodies, key, errors; no rate-limit headers."""

    name = "gemini"
    path = "/v1beta/models"
    request_id_header = "x-request-id"
    id_prefix = "resp_"

    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> None:
        if api_key is None:
            return
        bearer = headers.get("Authorization", "")
        if bearer.startswith("Bearer ") and len(bearer) > 7:
            return  # Vertex AI's OAuth token: its presence is what the emulator checks
        given = headers.get("x-goog-api-key")
        if not given:
            raise ApiError(
                403,
                "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers (callers without established identity). "
                "Please use API Key or other form of API consumer identity to call this API.",
                reason="auth",
            )
        if given != api_key:
            err = ApiError(
                400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", reason="auth"
            )
            err.code = "API_KEY_INVALID"
            raise err

    def route_model(self, match_info: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        """The model of the path's `{model}:{action}` (a 404 for an action Gemini has not); None on
        the batch and file paths (`emulator.batch.gemini`)."""
        target = match_info.get("target")
        return None if target is None else split_target(target)[0]

    def parse(self, body: Any, provider: ProviderConfig) -> ParsedRequest:
        return self.parse_at("chat", body, provider)

    def parse_at(self, endpoint: str, body: Any, provider: ProviderConfig) -> ParsedRequest:
        """Validate a body for `endpoint` (chat, embed or embeddings; the server puts the path's model
        in `model`)."""
        if not isinstance(body, dict):
            raise _invalid("Invalid JSON payload received. Expected an object.")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _invalid("* model: the path names no model")
        if provider.models is not None and model not in provider.models:
            raise self.unknown_model(model)
        allowed = ACCEPTED_FIELDS if endpoint == "chat" else EMBED_FIELDS
        if provider.refuse_unknown_fields:
            for name in body:
                if name != "model" and name not in allowed:
                    raise _invalid(
                        f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.'
                    )
        if endpoint == "chat":
            return self._generate(model, body, provider)
        return self._embed(model, endpoint, body)

    def _generate(self, model: str, body: dict[str, Any], provider: ProviderConfig) -> ParsedRequest:
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise _invalid("* GenerateContentRequest.contents: contents is not specified")
        texts: list[str] = []
        prompt = ""
        for i, content in enumerate(contents):
            role = content.get("role", "user") if isinstance(content, dict) else None
            if role not in ("user", "model"):
                raise _invalid(
                    f"* GenerateContentRequest.contents[{i}].role: Please use a valid role: user, model."
                )
            text = _text(content.get("parts"), f"contents[{i}]")
            texts.append(text)
            if role == "user" and text:
                prompt = text
        system = body.get("systemInstruction") or body.get("system_instruction")
        if isinstance(system, dict):
            texts.append(_text(system.get("parts"), "system_instruction"))
        config = body.get("generationConfig") or body.get("generation_config") or {}
        if not isinstance(config, dict):
            raise _invalid("* GenerateContentRequest.generation_config: must be an object")
        max_tokens = config.get("maxOutputTokens", config.get("max_output_tokens"))
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise _invalid("* GenerateContentRequest.generation_config.max_output_tokens: must be positive")
        check_ranges(config)
        n = config.get("candidateCount", config.get("candidate_count", 1))
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 8:
            raise _invalid("* GenerateContentRequest.generation_config.candidate_count: must be 1 to 8")
        prompt_tokens = sum(count_text(t) for t in texts)
        charged_max = max_tokens if max_tokens is not None else provider.default_max_tokens
        return ParsedRequest(
            tool_call=forced_call(body),
            model=model,
            prompt=prompt,
            max_tokens=charged_max,
            n=n,
            prompt_tokens=prompt_tokens,
            # Gemini's TPM counts input tokens (rate-limits doc): the prompt is the tokens charge
            cost=RequestCost(tokens=prompt_tokens, input_tokens=prompt_tokens, output_tokens=charged_max * n),
            fingerprint=hash(prompt),
        )

    def _embed(self, model: str, endpoint: str, body: dict[str, Any]) -> ParsedRequest:
        requests = [body] if endpoint == "embed" else body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise _invalid("* BatchEmbedContentsRequest.requests: requests is not specified")
        texts: list[str] = []
        dimensions = EMBED_DIMENSIONS
        for i, request in enumerate(requests):
            content = request.get("content") if isinstance(request, dict) else None
            if not isinstance(content, dict):
                raise _invalid(f"* EmbedContentRequest.content: content is not specified (request {i})")
            texts.append(_text(content.get("parts"), "content"))
            size = request.get("outputDimensionality")
            if isinstance(size, int) and not isinstance(size, bool) and 0 < size < EMBED_DIMENSIONS:
                dimensions = size
        total = sum(count_text(t) for t in texts)
        return ParsedRequest(
            model=model,
            prompt=texts[0],
            max_tokens=0,
            n=1,
            prompt_tokens=total,
            cost=RequestCost(tokens=total, input_tokens=total, output_tokens=0),
            fingerprint=hash(tuple(texts)),
            endpoint=endpoint,
            inputs=tuple(texts),
            dimensions=dimensions,
        )

    def count_text(self, text: str) -> int:
        return count_text(text)

    def success_body(
        self, req: ParsedRequest, text: str, tokens: int, cut: bool, body_id: str, wall: float
    ) -> bytes:
        if req.endpoint in ("embed", "embeddings"):
            vectors = [{"values": embedding_vector(t, req.dimensions)} for t in req.inputs]
            return orjson.dumps(
                {"embedding": vectors[0]} if req.endpoint == "embed" else {"embeddings": vectors}
            )
        finish = "MAX_TOKENS" if cut else "STOP"
        part: dict[str, Any] = {"text": text}
        if req.tool_call is not None:
            part, finish = {"functionCall": {"name": req.tool_call, "args": {}}}, "STOP"
        candidates = [
            {"content": {"parts": [part], "role": "model"}, "finishReason": finish, "index": i}
            for i in range(req.n)
        ]
        usage = {
            "promptTokenCount": req.prompt_tokens,
            "candidatesTokenCount": tokens * req.n,
            "totalTokenCount": req.prompt_tokens + tokens * req.n,
        }
        return orjson.dumps(
            {
                "candidates": candidates,
                "usageMetadata": usage,
                "modelVersion": req.model,
                "responseId": body_id,
            }
        )

    def error_body(self, err: ApiError, rid: str) -> bytes:
        details: list[dict[str, Any]] = []
        if err.code == "API_KEY_INVALID":
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }
            )
        if err.status == 429:
            ms = err.headers.pop("retry-after-ms", None)  # Gemini tells the wait in the body only
            err.headers.pop("retry-after", None)
            quota_id = err.code or "GenerateRequestsPerMinutePerProjectPerModel"
            violation = {
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                "quotaId": quota_id,
            }
            details.append(
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]}
            )
            if ms is not None:
                delay = f"{int(ms) / 1000:g}s"
                details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay})
        status = err.etype or _STATUS.get(err.status, "UNKNOWN")
        error: dict[str, Any] = {"code": err.status, "message": err.message, "status": status}
        if details:
            error["details"] = details
        return orjson.dumps({"error": error})

    def ratelimit_headers(self, states: tuple[DimensionState, ...], wall: float) -> dict[str, str]:
        return {}  # Gemini sends no rate-limit headers

    def not_found(self, method: str, path: str) -> ApiError:
        return ApiError(404, "NOT_FOUND", f"Requested entity was not found: {path}", reason="not_found")

    def bad_json(self) -> ApiError:
        return _invalid("Invalid JSON payload received.")

    def too_large(self, limit: int) -> ApiError:
        return ApiError(
            413, "INVALID_ARGUMENT", "Request payload size exceeds the limit.", reason="too_large"
        )

    def unknown_model(self, model: str) -> ApiError:
        return ApiError(
            404,
            "NOT_FOUND",
            f"models/{model} is not found for API version v1beta, or is not supported for generateContent.",
            reason="unknown_model",
        )

    def never_fits(self, dimension: str, cost: int, limit: int) -> ApiError:
        return _invalid(
            f"The input token count ({cost}) exceeds the maximum number of tokens allowed ({limit})."
        )

    def rate_limited(self, dimension: str, limit: int) -> ApiError:
        what = "requests" if dimension == "requests" else "input tokens"
        return ApiError(
            429,
            "RESOURCE_EXHAUSTED",
            f"You exceeded your current quota ({limit} {what} per minute per model). "
            "Please retry in the time RetryInfo gives.",
            reason="rate_limit",
        )

    def concurrency_rejected(self) -> ApiError:
        return ApiError(
            503, "UNAVAILABLE", "The model is overloaded. Please try again later.", reason="concurrency"
        )

    def server_error(self, status: int) -> ApiError:
        message = (
            "An internal error has occurred." if status == 500 else "The service is currently unavailable."
        )
        return ApiError(status, _STATUS.get(status, "INTERNAL"), message, reason="fault")

    def overloaded(self) -> ApiError:
        return ApiError(
            503, "UNAVAILABLE", "The model is overloaded. Please try again later.", reason="fault"
        )

    def insufficient_quota(self) -> ApiError:
        """A day's requests used up (RPD): a QuotaFailure naming the per-day quota, no RetryInfo."""
        err = ApiError(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            reason="fault",
        )
        err.code = "GenerateRequestsPerDayPerProjectPerModel"
        return err
