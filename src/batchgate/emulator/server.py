"""The emulator's HTTP server (aiohttp): one route per provider and family endpoint, the operator
endpoints, fault execution, and `Emulator`, the async context manager that runs it all.

Routes: `POST /<name>/v1/chat/completions`, `/v1/embeddings`, `/v1/responses` and
`/v1/completions` (OpenAI family), `POST /<name>/v1/messages` (Anthropic family), Azure's
deployment and v1 paths (`azure_api.AZURE_PATHS`), Gemini's (`gemini_api`) and Bedrock's
(`bedrock_routes`); a provider answers its other family's paths with a 404 in its own shape, and
an unknown path gets an OpenAI-style 404. Operator: `GET /_emulator/stats`, `POST /_emulator/reset`,
`GET /_emulator/received` (with `record_prompts: true`: each provider's parsed requests' prompts in
arrival order, whatever the answer — how a benchmark tells which items were sent when).
Every answer of a provider carries its family's rate-limit headers in the provider's header style
(none for `headers: none`, the `rate_limit_no_hint` and `insufficient_quota` faults and 429
concurrency rejections, which carry no hint at all) and a request id.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from types import TracebackType
from typing import Any

import orjson
from aiohttp import web

from batchgate.clock import Clock, LoopClock
from batchgate.emulator import streaming
from batchgate.emulator.anthropic_api import AnthropicFamily
from batchgate.emulator.azure_api import AzureFamily, provider_base_url
from batchgate.emulator.batch.service import BatchService
from batchgate.emulator.bedrock_api import BedrockFamily
from batchgate.emulator.config import EmulatorConfig
from batchgate.emulator.gemini_api import GeminiFamily
from batchgate.emulator.openai_api import OpenAIFamily
from batchgate.emulator.openai_endpoints import answer_for, parse_for
from batchgate.emulator.provider import EmulatedProvider, Plan
from batchgate.emulator.reset import abort as _abort
from batchgate.emulator.routes import add_provider_routes
from batchgate.emulator.wire import ApiError, Family, ParsedRequest, refuse_fields

OPERATOR_PREFIX = "/_emulator"
SHUTDOWN_TIMEOUT = 2.0
_JSON = "application/json"
_NON_JSON_BODY = b"<html><head><title>502 Bad Gateway</title></head><body>upstream error</body></html>"


class Emulator:
    """Emulated providers served over HTTP on `host:port` (port 0 picks a free one)."""

    def __init__(
        self, config: EmulatorConfig, host: str = "127.0.0.1", port: int = 0, *, clock: Clock | None = None
    ) -> None:
        self.config = config
        self.host = host
        self._requested_port = port
        self._clock: Clock = clock or LoopClock()
        # The encoding (~60 ms, holding the GIL) loads on the first count, when the first request
        # arrives: an emulator embedded in `batchgate run` would otherwise delay the job's first send.
        self._families: dict[str, Family] = {
            "openai": OpenAIFamily(),
            "anthropic": AnthropicFamily(),
            "azure": AzureFamily(),
            "gemini": GeminiFamily(),
            "bedrock": BedrockFamily(),
        }
        self.runtimes: dict[str, EmulatedProvider] = {}
        self.batches = BatchService(self._clock)  # the Batch APIs (files, batches)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._hangs: dict[asyncio.Future[None], str] = {}  # hanging request -> provider name
        self._watchers: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._seq = itertools.count(1)
        self._unrouted = 0
        self.received: dict[str, list[str]] = {p.name: [] for p in config.providers}
        self.started_at = 0.0
        self.first_request_at: float | None = None  # wall time the first provider request arrived
        self.streams = streaming.Streams(self._clock)  # streamed answers; their first events' times

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the emulator is already running")
        now, wall = self._clock.now(), self._clock.wall()
        self.started_at = wall
        for p in self.config.providers:
            family = self._families[p.family]
            self.runtimes[p.name] = EmulatedProvider(
                p, family, self.config.seed, self.config.window_seconds, now
            )
        app = web.Application(client_max_size=self.config.max_body_bytes)
        self.batches.register(app, self.runtimes)  # first: Gemini's `:batchGenerateContent` path
        for rt in self.runtimes.values():
            add_provider_routes(app, rt, self._handler, self._serve)
        app.router.add_get(f"{OPERATOR_PREFIX}/stats", self._stats_endpoint)
        app.router.add_post(f"{OPERATOR_PREFIX}/reset", self._reset_endpoint)
        app.router.add_get(f"{OPERATOR_PREFIX}/received", self._received_endpoint)
        app.router.add_get(f"{OPERATOR_PREFIX}/streams", self.streams.endpoint)
        app.router.add_route("*", "/{tail:.*}", self._unrouted_endpoint)
        app.on_shutdown.append(self._release_hangs)
        runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=SHUTDOWN_TIMEOUT
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._requested_port, reuse_address=True)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    def family(self, name: str) -> Family:
        """The wire family `name` ("openai" or "anthropic") this emulator serves with."""
        return self._families[name]

    def warm(self) -> None:
        """Load what the first request would (each family's token counting) now: a standalone
        emulator must not stall its first requests and admit them in a bunch, which no provider
        does (an embedded one skips this, so a job's first request leaves sooner)."""
        for name in {p.family for p in self.config.providers}:
            self._families[name].count_text("warm")

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Emulator:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _release_hangs(self, app: web.Application) -> None:
        for fut in list(self._hangs):
            if not fut.done():
                fut.set_result(None)

    # -- addresses and operator API ------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the emulator is not running")
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def base_url(self, name: str) -> str:
        """The base URL to give the provider's official SDK."""
        return provider_base_url(self.config, self.url, name)

    def hanging(self, name: str) -> int:
        """How many requests to provider `name` are hanging right now."""
        return sum(1 for n in self._hangs.values() if n == name)

    async def wait_hanging(self, name: str, count: int) -> None:
        """Return once exactly `count` requests to provider `name` hang (for tests; no polling)."""
        await self._wait_until(lambda: self.hanging(name) == count)

    async def wait_in_flight(self, name: str, count: int) -> None:
        """Return once exactly `count` requests to provider `name` hold a slot (for tests)."""
        await self._wait_until(lambda: self.runtimes[name].active == count)

    async def _wait_until(self, condition: Callable[[], bool]) -> None:
        if condition():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watcher = (condition, fut)
        self._watchers.append(watcher)
        try:
            await fut
        finally:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

    def _changed(self) -> None:
        """Wake the watchers whose condition now holds (cheap: usually there are none)."""
        for watcher in list(self._watchers):
            condition, fut = watcher
            if not fut.done() and condition():
                fut.set_result(None)
                self._watchers.remove(watcher)

    def stats(self) -> dict[str, Any]:
        providers: dict[str, Any] = {}
        for name, rt in self.runtimes.items():
            entry = rt.stats.to_dict()
            entry["family"] = rt.family.name
            entry["in_flight"] = rt.active
            entry["peak_in_flight"] = rt.peak_active
            entry["queued"] = rt.queued
            entry["hanging"] = self.hanging(name)
            entry["batches"] = self.batches.stats(name)
            entry["enforced_limits"] = {
                k: v for k in ("rpm", "tpm", "itpm", "otpm") if (v := getattr(rt.quota.current_limits, k))
            }
            providers[name] = entry
        return {
            "providers": providers,
            "started_at": self.started_at,
            "first_request_at": self.first_request_at,
            "unrouted": self._unrouted,
        }

    def reset(self) -> None:
        now = self._clock.now()
        self.started_at = self._clock.wall()
        self.first_request_at = None
        self._unrouted = 0
        self.streams.reset()
        for rt in self.runtimes.values():
            rt.reset(now)
            self.received[rt.name] = []
        self.batches.reset()

    async def _stats_endpoint(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(self.stats()), content_type=_JSON)

    async def _received_endpoint(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps({"providers": self.received}), content_type=_JSON)

    async def _reset_endpoint(self, request: web.Request) -> web.Response:
        self.reset()
        return web.Response(body=b'{"reset":true}', content_type=_JSON)

    async def _unrouted_endpoint(self, request: web.Request) -> web.Response:
        self._unrouted += 1
        fallback = self._families["openai"]
        err = fallback.not_found(request.method, request.path)
        rid = f"req_{next(self._seq):024x}"
        return web.Response(
            status=404,
            body=fallback.error_body(err, rid),
            headers={"Content-Type": _JSON, "x-request-id": rid},
        )

    # -- the provider endpoints ----------------------------------------------------------------

    def _handler(self, rt: EmulatedProvider, *, serves: bool, endpoint: str = "chat") -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._serve(rt, request, serves, endpoint)

        return handle

    async def _serve(
        self, rt: EmulatedProvider, request: web.Request, serves: bool, endpoint: str
    ) -> web.StreamResponse:
        if self.first_request_at is None:
            self.first_request_at = self._clock.wall()  # start-up latency, seen from this side
        fam = rt.family
        rt.stats.seen(self._clock.now())
        seq = next(self._seq)
        rid = f"req_{seq:024x}"
        model: str | None = None  # known once parsed: whose quota the headers report
        try:
            if not serves or request.method != "POST":
                raise fam.not_found(request.method, request.path)
            named = fam.route_model(request.match_info, request.query)  # Azure's deployment
            limit = self.config.max_body_bytes
            length = request.content_length
            if length is not None and length > limit:
                raise fam.too_large(limit)
            fam.authenticate(request.headers, rt.config.api_key)
            try:
                raw = await request.read()
            except web.HTTPRequestEntityTooLarge:
                raise fam.too_large(limit) from None
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise fam.bad_json() from None
            if named is not None and isinstance(body, dict):
                body["model"] = named
            refuse_fields(body, rt.config.reject_fields)
            req = self._parse(rt, endpoint, body)
            streaming.mark(req, body, request.path)
            if self.config.record_prompts:
                self.received[rt.name].append(req.prompt)
            rt.charge_for(req, body)
            model = req.model
            plan = rt.admit(req, self._clock.now(), self._clock.wall())
        except ApiError as err:
            if err.reason != "fault":
                rt.stats.reject(err.reason)
            return self._error(rt, err, rid, model)
        await rt.acquire_slot()
        if self._watchers:
            self._changed()
        try:
            if req.stream and plan.error is None and plan.fault in (None, "stall"):
                return await self._stream(rt, req, plan, request, seq)
            if plan.delay > 0:
                await self._clock.sleep(plan.delay)
            if plan.fault is None:
                rt.stats.complete(req.fingerprint, plan.admitted_at)
                rt.answered(req, plan, self._clock.now())  # before the headers: they show it
                return self._respond(rt, 200, self._answer(rt, req, plan, seq), rid, model=req.model)
            return await self._fault(rt, req, plan, request, seq)
        finally:
            rt.release_slot()
            if self._watchers:
                self._changed()

    @staticmethod
    def _parse(rt: EmulatedProvider, endpoint: str, body: Any) -> ParsedRequest:
        return parse_for(rt.family, endpoint, body, rt.config)

    def _answer(self, rt: EmulatedProvider, req: ParsedRequest, plan: Plan, seq: int) -> bytes:
        """The success body of an admitted request, in its family's and endpoint's shape."""
        fam, wall = rt.family, self._clock.wall()
        body_id = f"{fam.id_prefix}{seq:024x}"
        return answer_for(fam, req, plan.text, plan.tokens, plan.cut, body_id, wall)

    def _respond(
        self,
        rt: EmulatedProvider,
        status: int,
        body: bytes,
        rid: str,
        *,
        ratelimit: bool = True,
        model: str | None = None,
    ) -> web.Response:
        """`model`: whose quota the rate-limit headers report (a model's own, or the key's)."""
        headers = {"Content-Type": _JSON, rt.family.request_id_header: rid}
        if ratelimit and rt.header_style != "none":
            states = rt.quota_for(model).snapshot(self._clock.now(), rt.header_style)
            headers.update(rt.family.ratelimit_headers(states, self._clock.wall()))
        return web.Response(status=status, body=body, headers=headers)

    def _error(self, rt: EmulatedProvider, err: ApiError, rid: str, model: str | None = None) -> web.Response:
        body = rt.family.error_body(err, rid)
        response = self._respond(rt, err.status, body, rid, ratelimit=err.ratelimit_headers, model=model)
        response.headers.update(err.headers)
        return response

    async def _stream(
        self, rt: EmulatedProvider, req: ParsedRequest, plan: Plan, request: web.Request, seq: int
    ) -> web.StreamResponse:
        """The answer as events (`emulator.streaming`), counted as answered as it starts."""
        rt.stats.complete(req.fingerprint, plan.admitted_at)
        rt.answered(req, plan, self._clock.now())
        rid = f"req_{seq:024x}"
        headers = dict(self._respond(rt, 200, b"", rid, model=req.model).headers)
        answer = self._answer(rt, req, plan, seq)
        return await self.streams.respond(request, rt.name, req, plan, answer, headers, self._hang, rid)

    async def _hang(self, name: str) -> None:
        """Until the client gives up (the handler is cancelled) or the server stops."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._hangs[fut] = name
        self._changed()
        try:
            await fut
        finally:
            del self._hangs[fut]
            self._changed()

    async def _fault(
        self, rt: EmulatedProvider, req: ParsedRequest, plan: Plan, request: web.Request, seq: int
    ) -> web.StreamResponse:
        rid = f"req_{seq:024x}"
        if plan.error is not None:
            return self._error(rt, plan.error, rid, req.model)
        if plan.fault in ("hang", "stall"):
            await self._hang(rt.name)
            return _abort(request)
        if plan.fault == "reset":
            return _abort(request)
        body = self._answer(rt, req, plan, seq)
        if plan.fault == "truncated":
            return self._respond(rt, 200, body[: max(1, len(body) // 2)], rid, model=req.model)
        response = self._respond(rt, 200, _NON_JSON_BODY, rid, model=req.model)
        response.headers["Content-Type"] = "text/html"
        return response
