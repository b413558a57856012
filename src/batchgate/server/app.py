"""The HTTP surface (aiohttp): OpenAI's Files and Batches endpoints under `/v1`, behind bearer-key
auth, every refusal in OpenAI's error shape `{"error": {"message", "type", "param", "code"}}`.

    POST /v1/files                  multipart `file` + `purpose=batch`
    GET  /v1/files                  this key's files
    GET  /v1/files/{id}             GET /v1/files/{id}/content      DELETE /v1/files/{id}
    POST /v1/batches                GET /v1/batches (`after`, `limit`); a batch names one endpoint
    GET  /v1/batches/{id}           POST /v1/batches/{id}/cancel
    /  /static/...  /v1/dashboard/  the web dashboard (`dashboard`): page public, its data keyed
    /v1/messages/batches/...        Anthropic's Message Batches (`anthropic_api`), its error shape
    GET  /metrics                   Prometheus metrics (`metrics_route`): no key; job ids for an admin key
    POST /v1/chat/completions       POST /v1/messages (Anthropic's error shape): the live proxy (`live`),
    POST /v1/embeddings  POST /v1/responses  POST /v1/completions  (with the same)

Keys come as `Authorization: Bearer <token>` or (the anthropic SDK) `x-api-key: <token>`.
Every body is bounded by its route's class (`body_limits`: a 413 naming the bound, before reading).
A key sees only its own files and batches (another key's are a 404, as unknown ids are); an admin
key sees all. An unexpected failure is a 500 with a generic message: no traceback, no secret; a
job store failure (`StoreError`) is a 500 saying so, in the same JSON shape, its file named in the log only.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import orjson
from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Middleware

from batchgate import logs
from batchgate.errors import ServiceRequestError, StoreError
from batchgate.server.batch_api import anthropic_api
from batchgate.server.batch_api.batches import Batches
from batchgate.server.batch_api.files import Files
from batchgate.server.batch_api.shapes import BatchObject, batch_object, error_body, file_object, page
from batchgate.server.door import body_limits
from batchgate.server.door.query import check_text, query_int
from batchgate.server.door.request_body import json_object
from batchgate.server.job_api import jobs_api
from batchgate.server.job_api.native import Jobs
from batchgate.server.proxy import live
from batchgate.server.tenancy.keys import authenticate
from batchgate.server.tenancy.rates import DEFAULT_TENANTS, Rates, TenantLimits, retry_after
from batchgate.server.tenancy.registry import ApiKey, BatchRecord, FileRecord, Registry
from batchgate.server.views import metrics_route, openapi
from batchgate.server.views.dashboard import Dashboard
from batchgate.server.views.quota_ring import QuotaRing

log = logging.getLogger("batchgate.server")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
KEY = "batchgate.key"  # the request's ApiKey, set by `auth`
DEFAULT_LIMIT, MAX_LIMIT = 20, 100
MAX_FILES = 10_000  # GET /v1/files: OpenAI's default and largest `limit`
_CHUNK = 1 << 16
_CREATES = ("/v1/batches", "/v1/messages/batches", "/v1/jobs")
_HTTP_TYPES = {401: "invalid_request_error", 404: "invalid_request_error", 405: "invalid_request_error"}


@dataclass(frozen=True, slots=True)
class Service:
    registry: Registry
    files: Files
    batches: Batches
    jobs: Jobs
    ring: QuotaRing | None = None  # the providers page's quota samples
    limits: body_limits.BodyLimits = body_limits.DEFAULT  # the body bound of each route class
    tenants: TenantLimits = DEFAULT_TENANTS  # creations a minute per key


def json(data: Mapping[str, object], status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _refusal(
    request: web.Request, status: int, message: str, type: str, code: str | None, param: str | None = None
) -> web.Response:
    """OpenAI's error shape, or Anthropic's under Anthropic's paths."""
    if request.path.startswith(live.MESSAGES_PATH):  # Anthropic's batches and messages
        body = anthropic_api.error_body(status, message)
    else:
        body = error_body(status, message, type, code, param)
    return web.Response(body=body, status=status, content_type="application/json")


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ServiceRequestError as exc:
        return _refusal(request, exc.status, exc.message, exc.type, exc.code, exc.param)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = f"Invalid URL ({request.method} {request.path})" if exc.status in (404, 405) else exc.reason
        return _refusal(
            request, exc.status, message, _HTTP_TYPES.get(exc.status, "invalid_request_error"), None
        )
    except StoreError as exc:  # the job store failed: the operator's log names it, the client hears why
        log.error("%s %s: job store error: %s", request.method, request.path, exc)
        return _refusal(
            request, 500, "The server's job store failed (its log says why).", "server_error", None
        )
    except ConnectionResetError:  # the client left, or its stalled body was cut: no one to tell
        logs.event(log, logging.DEBUG, "request_cut", method=request.method, path=request.path)
        return _refusal(
            request, 400, "The connection closed before the request arrived.", "invalid_request_error", None
        )
    except Exception as exc:  # a bug: said in one line, never a traceback to the client
        log.error("%s %s: internal error: %s", request.method, request.path, type(exc).__name__)
        return _refusal(
            request, 500, "The server had an error while processing your request.", "server_error", None
        )


def auth(registry: Registry, failures: Rates, now: Callable[[], float]) -> Middleware:
    """A `/v1` request's key checked; an address past `failures.per_minute` failed checks a
    minute gets a 429 (with `Retry-After`), its keys not checked, until its turns refill."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        check_text(request)
        if request.path.startswith("/v1/") or request.path == "/v1":
            address = request.remote or "?"
            wait = failures.wait(address, now())
            if wait is not None:
                said = "Too many failed authentications from this address; retry later."
                refusal = _refusal(request, 429, said, "rate_limit_error", "too_many_auth_failures")
                refusal.headers["Retry-After"] = retry_after(wait)
                return refusal
            headers = request.headers
            key = authenticate(registry, headers.get("Authorization"), headers.get("x-api-key"))
            if key is None:
                failures.take(address, now())
                raise ServiceRequestError(
                    401,
                    "Incorrect or missing API key. Create one with `batchgate keys create`.",
                    code="invalid_api_key",
                )
            request[KEY] = key
        return await handler(request)

    return check


def creating(rates: Rates, now: Callable[[], float], registry: Registry, in_flight: int) -> Middleware:
    """A key's creations (batches, message batches, jobs) at most `rates.per_minute` a minute: a
    429 naming the limit, with `Retry-After`, past it; and none while `in_flight` of its batches
    have not ended."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and request.path.rstrip("/") in _CREATES:
            owner = _key(request).id
            if (busy := registry.in_flight(owner)) >= in_flight:
                said = f"This key has {busy} batches not ended: its limit (--max-in-flight-per-key)."
                return _refusal(request, 429, said, "rate_limit_error", "too_many_in_flight")
            wait = rates.take(owner, now())
            if wait is not None:
                said = (
                    f"Too many batches created: a key may create {rates.per_minute} a minute"
                    " (the server's --max-batches-per-minute)."
                )
                refusal = _refusal(request, 429, said, "rate_limit_error", "rate_limit_exceeded")
                refusal.headers["Retry-After"] = retry_after(wait)
                return refusal
        return await handler(request)

    return check


def _over_storage(stored: int, limit: int) -> ServiceRequestError:
    said = (
        f"This upload would take the key's stored files past {limit} bytes ({stored} stored; the"
        " server's --max-stored-bytes-per-key). Delete files to make room."
    )
    return ServiceRequestError(413, said, code="storage_limit_exceeded")


def _key(request: web.Request) -> ApiKey:
    key = request[KEY]
    assert isinstance(key, ApiKey)
    return key


def _viewer(request: web.Request) -> str | None:
    """Whose objects the request may see: its key's, or everyone's (None) for an admin key."""
    key = _key(request)
    return None if key.admin else key.id


class Api:
    def __init__(self, service: Service) -> None:
        self.s = service

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/files", self.upload),
            web.get("/v1/files", self.list_files),
            web.get("/v1/files/{id}", self.get_file),
            web.get("/v1/files/{id}/content", self.file_content),
            web.delete("/v1/files/{id}", self.delete_file),
            web.post("/v1/batches", self.create_batch),
            web.get("/v1/batches", self.list_batches),
            web.get("/v1/batches/{id}", self.get_batch),
            web.post("/v1/batches/{id}/cancel", self.cancel_batch),
        ]

    # -- files -----------------------------------------------------------------------------------
    async def upload(self, request: web.Request) -> web.Response:
        owner, tenants = _key(request).id, self.s.tenants
        count, size = self.s.registry.stored(owner)
        if count >= tenants.files_per_key:
            said = f"This key stores {count} files, its limit (the server's --max-files-per-key)."
            raise ServiceRequestError(429, said, type="rate_limit_error", code="too_many_files")
        if size + (request.content_length or 0) - body_limits.UPLOAD_OVERHEAD > tenants.stored_bytes_per_key:
            raise _over_storage(size, tenants.stored_bytes_per_key)
        if not request.content_type.startswith("multipart/"):
            raise ServiceRequestError(400, "Uploads must be multipart/form-data with 'file' and 'purpose'.")
        try:
            purpose, saved = await self._read_upload(request)
        except (ValueError, HttpProcessingError):  # no boundary, a malformed part header, ...
            raise ServiceRequestError(400, "The upload is not well-formed multipart/form-data.") from None
        if saved is None:
            raise ServiceRequestError(400, "Missing required parameter: 'file'.", param="file")
        if size + saved.bytes > self.s.tenants.stored_bytes_per_key:
            self.s.files.delete(saved)
            raise _over_storage(size, self.s.tenants.stored_bytes_per_key)
        if purpose != "batch":
            self.s.files.delete(saved)
            raise ServiceRequestError(
                400,
                f"Invalid value for 'purpose': {purpose!r}. Supported values are: 'batch'.",
                param="purpose",
            )
        return json(file_object(saved))

    async def _read_upload(self, request: web.Request) -> tuple[str | None, FileRecord | None]:
        """The `purpose` field and the `file` saved (deleted again when the body turns out bad)."""
        purpose: str | None = None
        saved = None
        try:
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader):
                    continue
                if part.name == "purpose":
                    purpose = (await part.text()).strip()
                elif part.name == "file" and saved is None:
                    name = part.filename or "upload.jsonl"
                    saved = await self.s.files.save(_key(request).id, name, "batch", _chunks(part))
        except BaseException:
            if saved is not None:
                self.s.files.delete(saved)
            raise
        return purpose, saved

    async def list_files(self, request: web.Request) -> web.Response:
        limit = query_int(request.query.get("limit"), "limit", MAX_FILES, MAX_FILES)  # OpenAI's: 10,000
        after = request.query.get("after") or None
        files, more = self.s.registry.page_files(_viewer(request), limit, after)
        return json(page([file_object(f) for f in files], has_more=more))

    async def get_file(self, request: web.Request) -> web.Response:
        return json(file_object(self.s.files.visible(request.match_info["id"], _viewer(request))))

    async def file_content(self, request: web.Request) -> web.StreamResponse:
        f = self.s.files.visible(request.match_info["id"], _viewer(request))
        return web.FileResponse(self.s.files.path(f.id), headers={"Content-Type": "application/octet-stream"})

    async def delete_file(self, request: web.Request) -> web.Response:
        f = self.s.files.visible(request.match_info["id"], _viewer(request))
        self.s.files.delete(f)
        return json({"id": f.id, "object": "file", "deleted": True})

    # -- batches ---------------------------------------------------------------------------------
    async def _batch(self, b: BatchRecord) -> BatchObject:
        runs = self.s.batches.runs
        return batch_object(b, await runs.counts(b), await runs.usage(b))

    async def create_batch(self, request: web.Request) -> web.Response:
        body = await json_object(request)
        b = await self.s.batches.create(_key(request).id, _viewer(request), body)
        return json(await self._batch(b))

    async def get_batch(self, request: web.Request) -> web.Response:
        b = self.s.batches.visible(request.match_info["id"], _viewer(request))
        return json(await self._batch(b))

    async def cancel_batch(self, request: web.Request) -> web.Response:
        b = self.s.batches.visible(request.match_info["id"], _viewer(request))
        b = self.s.batches.runs.cancel(b)
        return json(await self._batch(b))

    async def list_batches(self, request: web.Request) -> web.Response:
        limit = query_int(request.query.get("limit"), "limit", DEFAULT_LIMIT, MAX_LIMIT)
        after = request.query.get("after") or None
        found, more = self.s.registry.list_batches("openai", _viewer(request), limit, after=after)
        data = [await self._batch(b) for b in found]
        return json(page(data, more))


async def _chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(_CHUNK):
        yield chunk


def _owner_and_viewer(request: web.Request) -> tuple[str, str | None]:
    return _key(request).id, _viewer(request)


def make_app(service: Service, outer: Sequence[Middleware] = ()) -> web.Application:
    """The app; `outer` middlewares run first (the connection door's)."""
    bounded = body_limits.middleware(service.limits)
    parts = service.batches.parts
    tenants, now = service.tenants, parts.clock.now
    creations = creating(Rates(tenants.batches_per_minute), now, service.registry, tenants.in_flight_per_key)
    keyed = auth(service.registry, Rates(tenants.auth_failures_per_minute), now)
    app = web.Application(
        middlewares=[*outer, errors, keyed, creations, bounded],
        client_max_size=service.limits.largest,
    )
    anthropic = anthropic_api.AnthropicApi(service.registry, service.batches, _owner_and_viewer)
    routes = [
        *Api(service).routes(),
        *anthropic.routes(),
        *live.LiveApi(parts.gateway, parts.clock).routes(),
        *jobs_api.JobsApi(service.jobs, _owner_and_viewer).routes(),  # the native job API
        *metrics_route.MetricsRoute(service.jobs.runs).routes(),  # no key: nothing secret
        *Dashboard(service.jobs, _owner_and_viewer, service.ring).routes(),
        *openapi.routes(min(parts.config.route_models(), default=None)),
    ]
    app.add_routes(body_limits.expecting(routes, service.limits))  # `Expect: 100-continue` by bound
    return app
