"""OpenTelemetry spans of the gateway's requests, caught by the SDK's in-memory exporter, over real
HTTP against the emulator: a request that fails over shows each attempt as a child span with its
status and the error that made it retry; a one-attempt request keeps its figures on its own span;
the provider receives the request span's `traceparent`; with tracing off nothing is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from batchgate import trace_hooks
from batchgate.clock import FakeClock
from batchgate.config import GatewayConfig, ProviderConfig, config_from_dict
from batchgate.gateway import Gateway
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.observe.tracing.setup import tracing_on
from batchgate.policy.circuit import CircuitSettings
from batchgate.quota.limits import QuotaLimits
from batchgate.runtime import build_runtime
from batchgate.tokens import EstimatingTokenCounter
from engineutil import drive, one_target_scheduler
from loopback import serving

from .conftest import EmulatorFactory, chat, emu_provider, gateway_config

pytestmark = pytest.mark.integration


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    with tracing_on(exporter=exporter):
        yield exporter
    assert trace_hooks.tracer is None  # off again after the block


def _children(finished: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    kids = [s for s in finished if s.parent is not None and s.parent.span_id == parent.context.span_id]
    return sorted(kids, key=lambda s: s.start_time or 0)


async def test_a_failover_shows_each_attempt_with_its_cause(
    emulator: EmulatorFactory, spans: InMemorySpanExporter
) -> None:
    providers = [emu_provider("alpha", faults={"server_error": 1.0}), emu_provider("beta")]
    emu = await emulator(providers)
    routes = [{"model": "m", "targets": ["alpha", "beta"]}]
    cfg = gateway_config(emu, providers, routes, settings={"retry": {"max_attempts": 6, "base_delay": 0.01}})
    async with Gateway(cfg) as gw:
        results = [await gw.arun(chat(f"note {i}"), index=i) for i in range(6)]
    assert all(r.ok for r in results), [r.error for r in results]
    finished = spans.get_finished_spans()
    requests = [s for s in finished if s.name == "chat m"]
    assert len(requests) == 6
    failed_over = 0
    for result, span in zip(results, sorted(requests, key=lambda s: s.start_time or 0), strict=True):
        attrs = span.attributes or {}
        assert attrs.get("batchgate.attempts", 1) == len(result.attempts)  # left out: one
        assert attrs["batchgate.target"] == "beta"  # where it was answered
        assert attrs["gen_ai.usage.output_tokens"] == result.usage.completion_tokens  # type: ignore[union-attr]
        assert span.status.status_code is StatusCode.UNSET
        attempts = _children(finished, span)
        if len(result.attempts) == 1:
            assert attempts == []  # one attempt: its figures are the request's own
            continue
        failed_over += 1
        assert [a.name for a in attempts] == ["attempt"] * len(result.attempts)
        shown = [(a.attributes or {}) for a in attempts]
        assert [s["batchgate.target"] for s in shown] == [a.provider for a in result.attempts]
        assert [s.get("error.type") for s in shown[:-1]] == ["server_error"] * (len(shown) - 1)
        assert [s["http.response.status_code"] for s in shown] == [a.status for a in result.attempts]
        assert all(s["http.response.status_code"] >= 500 for s in shown[:-1])  # type: ignore[operator]
        assert "error.type" not in shown[-1]
        assert shown[-1]["batchgate.target"] == "beta"
        assert [a.status.status_code for a in attempts[:-1]] == [StatusCode.ERROR] * (len(shown) - 1)
        assert all(span.start_time <= a.start_time <= (a.end_time or 0) for a in attempts)  # type: ignore[operator]
        assert (attempts[-1].end_time or 0) <= (span.end_time or 0)
    assert failed_over > 0, "alpha fails every call: some request must have tried it first"


async def test_a_failed_request_has_an_error_status(
    emulator: EmulatorFactory, spans: InMemorySpanExporter
) -> None:
    providers = [emu_provider("alpha", faults={"insufficient_quota": 1.0})]
    emu = await emulator(providers)
    async with Gateway(gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])) as gw:
        result = await gw.arun(chat("note"))
    assert not result.ok
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == result.error.kind  # type: ignore[union-attr]


def _upstream(seen: list[str | None]) -> web.Application:
    """A provider that answers every chat call and keeps the `traceparent` it was sent."""

    async def chat_completions(request: web.Request) -> web.Response:
        seen.append(request.headers.get("traceparent"))
        usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        answer: dict[str, Any] = {
            "id": "c1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": usage,
        }
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat_completions)
    return app


def _upstream_config(url: str) -> GatewayConfig:
    provider = {
        "name": "up",
        "kind": "openai",
        "base_url": f"{url}/v1",
        "limits": {"rpm": 6000, "tpm": 10**7},
    }
    return config_from_dict(
        {"providers": [provider], "routes": [{"model": "m", "targets": ["up"]}]}, environ={}
    )


async def test_the_provider_gets_the_request_spans_traceparent(spans: InMemorySpanExporter) -> None:
    seen: list[str | None] = []
    async with serving(_upstream(seen)) as url, Gateway(_upstream_config(url)) as gw:
        assert (await gw.arun(chat("note"))).ok
    (span,) = spans.get_finished_spans()
    assert span.context is not None
    flags = int(span.context.trace_flags)
    assert flags & 1  # sampled
    assert seen == [f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-{flags:02x}"]
    assert trace_hooks.TRACEPARENT.get() is None  # reset once the request ended


async def test_tracing_off_sends_no_traceparent() -> None:
    seen: list[str | None] = []
    assert trace_hooks.tracer is None
    async with serving(_upstream(seen)) as url, Gateway(_upstream_config(url)) as gw:
        assert (await gw.arun(chat("note"))).ok
    assert seen == [None]


class _HangsFirst:
    """A provider client whose first call never answers and whose next ones answer at once: the
    first attempt's cold hedge (10 s on the fake clock) wins — answering before the race first
    looks at it (racing.py once let such a hedge go unseen and waited out the primary)."""

    name, kind = "p", "openai"

    def __init__(self) -> None:
        self.calls = 0

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        self.calls += 1
        if self.calls == 1:
            await asyncio.get_running_loop().create_future()  # never answered
        return ProviderResponse(200, {"choices": [{"message": {"content": "ok"}}]}, Usage(7, 2), {})

    def rate_limits(self, headers: Any, wall_now: float) -> RateLimitSnapshot:
        return RateLimitSnapshot()


async def test_a_hedged_request_shows_the_leg_that_lost_the_race(spans: InMemorySpanExporter) -> None:
    clock = FakeClock()
    config = ProviderConfig(name="p", kind="openai", base_url="http://x", limits=QuotaLimits(rpm=600))
    client = _HangsFirst()
    runtime = build_runtime(config, client, EstimatingTokenCounter(), clock, CircuitSettings(), timeout=60.0)
    sched = one_target_scheduler(runtime, clock, max_attempts=4)
    task = asyncio.ensure_future(sched.run(0, chat("hello"), "r0"))
    await drive(clock, [task])
    result = task.result()
    assert result.ok
    assert client.calls == 2  # the primary, then its hedge
    assert len(result.attempts) == 1  # the result keeps the winner
    finished = spans.get_finished_spans()
    (request,) = [s for s in finished if s.name == "chat m"]
    assert (request.attributes or {}).get("batchgate.hedged") is True
    legs = _children(finished, request)
    # by start: the primary that hung until the hedge (sent 10 s later) won, then the hedge
    assert [(a.attributes or {}).get("batchgate.lost_race") for a in legs] == [True, None]
    lost, won = legs
    assert (lost.attributes or {})["batchgate.target"] == "p"
    assert (won.start_time or 0) - (lost.start_time or 0) == 10_000_000_000  # the cold hedge
    assert lost.end_time == won.end_time  # cancelled as the hedge answered
