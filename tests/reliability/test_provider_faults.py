"""Every way a provider fails, over real loopback HTTP: retry hints honoured (and the whole
provider paused), absurd hints capped or ignored, never-retried answers, bounded retries with
their attempt history, unreachable hosts, broken and unusable 200s, hangs, and a provider whose
capacity halves mid-run. Answers the emulator cannot give come from a scripted server."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    MalformedResponse,
    NoTargetLeft,
    OverloadedError,
    QuotaExhaustedError,
    RequestTimeout,
    ServerError,
)
from batchgate.gateway import Gateway
from batchgate.models import Result
from batchgate.stats import GatewayStatistics

from .helpers import emu_provider
from .scripted import Answer, ScriptedServer, error_body

pytestmark = pytest.mark.integration

RUN_LIMIT_S = 60.0


def chat(text: str, model: str = "m") -> dict[str, Any]:
    return {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": text}]}


def config(
    base_url: str,
    *,
    kind: str = "openai",
    limits: dict[str, Any] | None = None,
    max_attempts: int = 4,
    max_hint: float = 60.0,
    total_timeout: float = 10.0,
    api_key: str | None = None,
) -> GatewayConfig:
    provider: dict[str, Any] = {"name": "p", "kind": kind, "base_url": base_url, "limits": limits or {}}
    if api_key is not None:
        provider["api_key"] = api_key
    return config_from_dict(
        {
            "providers": [provider],
            "routes": [{"model": "m", "targets": ["p"]}],
            "settings": {
                "seed": 5,
                "retry": {
                    "max_attempts": max_attempts,
                    "base_delay": 0.02,
                    "max_delay": 0.1,
                    "max_hint": max_hint,
                },
                "timeouts": {"connect": 2, "total": total_timeout},
            },
        },
        environ={},
    )


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[[Callable[[int, dict[str, Any]], Answer]], Any]]:
    servers: list[ScriptedServer] = []

    async def start(script: Callable[[int, dict[str, Any]], Answer]) -> ScriptedServer:
        server = await ScriptedServer(script).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def emulator() -> AsyncIterator[Callable[..., Any]]:
    started: list[Emulator] = []

    async def start(providers: list[dict[str, Any]]) -> Emulator:
        emu = Emulator(emulator_config_from_dict({"seed": 11, "providers": providers}))
        await emu.start()
        started.append(emu)
        return emu

    yield start
    for emu in started:
        await emu.stop()


async def run_all(
    cfg: GatewayConfig,
    bodies: list[dict[str, Any]],
    gw_out: list[Gateway] | None = None,
    stats_out: list[GatewayStatistics] | None = None,
) -> list[Result]:
    async with Gateway(cfg) as gw:
        if gw_out is not None:
            gw_out.append(gw)
        results = await asyncio.wait_for(gw.abatch(bodies), RUN_LIMIT_S)
        if stats_out is not None:
            stats_out.append(gw.statistics())
        return results


def kinds(result: Result) -> list[str | None]:
    return [a.error_kind for a in result.attempts]


# -- 429 with retry-after: waited, and the whole provider paused -------------------------------------


@pytest.mark.slow  # waits a real Retry-After
async def test_retry_after_pauses_every_request_to_the_provider(scripted: Any) -> None:
    hint = 1.5
    refused_at = 5

    def script(i: int, body: dict[str, Any]) -> Answer:
        if i == refused_at:
            return Answer(429, error_body("requests", "Rate limit reached", "rate_limit_exceeded"),
                          {"retry-after": f"{hint:g}"})  # fmt: skip
        return Answer()

    server = await scripted(script)
    cfg = config(server.base_url, limits={"rpm": 600})  # paced ~10/s: without a pause ~10 would arrive
    gateways: list[Gateway] = []
    samples: list[tuple[float, float | None, int]] = []

    def sample() -> None:
        now = asyncio.get_running_loop().time()
        stats = gateways[0].runtimes["p"].pool.statistics()
        samples.append((now, stats.paused_until, stats.pauses))

    def on_answer(arrival: Any, answer: Answer) -> None:
        if answer.status == 429:
            asyncio.get_running_loop().call_later(0.2, sample)

    server.hooks.append(on_answer)
    stats: list[GatewayStatistics] = []
    results = await run_all(cfg, [chat(f"request {i}") for i in range(20)], gateways, stats)

    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    refused = next(r for r in results if r.attempts[0].status == 429)
    assert kinds(refused) == ["rate_limit", None]
    # the pool recorded the pause, and it was in force (for the hinted length, no longer) after the 429
    assert len(samples) == 1
    now, paused_until, pauses = samples[0]
    assert pauses == 1
    assert paused_until is not None
    assert 0 < paused_until - now <= hint
    # nobody was sent during the pause: no arrival in its middle, and the refused one came back after it
    t429 = server.arrivals[refused_at].at
    during = [a for a in server.arrivals if t429 + 0.3 < a.at < t429 + hint - 0.3]
    assert during == [], [round(a.at - t429, 3) for a in during]
    retry = [a for a in server.arrivals if a.prompt == server.arrivals[refused_at].prompt]
    assert len(retry) == 2
    assert retry[1].at - t429 >= hint - 0.3
    assert stats[0].providers["p"].rate_limited == 1


# -- absurd hints: capped or ignored, never a day-long sleep ------------------------------------------


@pytest.mark.parametrize(
    ("headers", "capped"),
    [
        ({"retry-after": "86400"}, True),
        ({"retry-after-ms": "86400000"}, True),
        ({"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}, True),
        ({"retry-after": "-30"}, False),
        ({"retry-after": "NaN"}, False),
        ({"retry-after": "inf"}, False),
        ({"retry-after": "soon, please"}, False),
        ({"retry-after-ms": "-1", "retry-after": "1e400"}, False),
    ],
)
async def test_absurd_retry_hints_are_capped_or_ignored(
    scripted: Any, headers: dict[str, str], capped: bool
) -> None:
    cap = 0.2  # past the plain backoff's 0.1 s most: a gap of the cap is the hint honoured

    def script(i: int, body: dict[str, Any]) -> Answer:
        if i == 0:
            return Answer(429, error_body("requests", "slow down", "rate_limit_exceeded"), headers)
        return Answer()

    server = await scripted(script)
    stats: list[GatewayStatistics] = []
    (result,) = await run_all(config(server.base_url, max_hint=cap), [chat("hello")], stats_out=stats)
    assert result.ok, result.error
    assert kinds(result) == ["rate_limit", None]
    gap = server.arrivals[1].at - server.arrivals[0].at
    assert gap < 15.0  # the cap (0.2 s) with a wide margin for a noisy machine: never a day
    quota = stats[0].providers["p"].quota
    assert quota is not None
    pauses = quota.pauses
    if capped:
        assert pauses == 1
        assert gap >= cap * 0.8  # the capped hint was honoured
    else:
        assert pauses == 0  # the garbage hint was ignored: plain backoff instead


# -- never retried: exhausted quota, spend limit, other 4xx ------------------------------------------


@pytest.mark.parametrize("family", ["openai", "anthropic"])
async def test_exhausted_quota_or_spend_limit_is_never_retried(emulator: Any, family: str) -> None:
    emu = await emulator([emu_provider("p", family, faults={"insufficient_quota": 1.0})])
    (result,) = await run_all(config(emu.base_url("p"), kind=family), [chat("hi")])
    assert isinstance(result.error, QuotaExhaustedError)
    assert len(result.attempts) == 1
    assert emu.stats()["providers"]["p"]["faults"]["insufficient_quota"] == 1


@pytest.mark.parametrize(
    ("status", "cls"),
    [(400, BadRequestError), (404, BadRequestError), (413, BadRequestError), (422, BadRequestError)],
)  # fmt: skip
async def test_other_4xx_is_never_retried(scripted: Any, status: int, cls: type[Exception]) -> None:
    server = await scripted(lambda i, b: Answer(status, error_body("invalid_request_error", "no")))
    (result,) = await run_all(config(server.base_url), [chat("hi")])
    assert isinstance(result.error, cls)
    assert len(server.arrivals) == 1
    assert [a.status for a in result.attempts] == [status]


@pytest.mark.parametrize("status", [401, 403])
async def test_a_key_refused_from_the_start_takes_the_target_out(scripted: Any, status: int) -> None:
    server = await scripted(lambda i, b: Answer(status, error_body("authentication_error", "no")))
    (result,) = await run_all(config(server.base_url, max_attempts=8), [chat("hi")])
    assert isinstance(result.error, NoTargetLeft)
    assert f"provider p taken out: API key refused (HTTP {status}), 3 times" in result.error.message
    assert len(server.arrivals) == 3  # the target was in doubt until then, not 8 tries
    assert [a.status for a in result.attempts] == [status] * 3


@pytest.mark.parametrize("status", [401, 403])
async def test_a_key_refused_by_a_target_that_answered_is_never_retried(scripted: Any, status: int) -> None:
    server = await scripted(
        lambda i, b: Answer() if i == 0 else Answer(status, error_body("authentication_error", "no"))
    )
    async with Gateway(config(server.base_url)) as gw:
        first = await gw.arun(chat("a"))
        second = await gw.arun(chat("b"))
    assert first.ok, first.error
    assert isinstance(second.error, AuthenticationError)
    assert len(server.arrivals) == 2


async def test_an_error_body_echoing_the_key_is_scrubbed(scripted: Any) -> None:
    key = "sk-echo-canary-7f3a9c"

    def script(i: int, body: dict[str, Any]) -> Answer:
        if i == 0:
            return Answer()  # it answered once: its 401 is this request's, the error kept whole
        echoed = server.arrivals[i].authorization
        return Answer(401, error_body("invalid_request_error", f"bad key {echoed}"), {"x-echo": echoed})

    server = await scripted(script)
    async with Gateway(config(server.base_url, api_key=key)) as gw:
        assert (await gw.arun(chat("first"))).ok
        result = await gw.arun(chat("hi"))
    assert isinstance(result.error, AuthenticationError)
    assert server.arrivals[1].authorization == f"Bearer {key}"
    texts = [str(result.error), repr(result.error), *(a.error_message or "" for a in result.attempts)]
    texts += [str(v) for v in result.error.headers.values()] + [repr(result.error.body)]
    assert not [t for t in texts if key in t]


# -- bounded retries with their history ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "fault", "cls", "statuses"),
    [
        ("openai", "server_error", ServerError, {500, 502, 503}),
        ("anthropic", "server_error", ServerError, {500, 502, 503}),
        ("anthropic", "overloaded", OverloadedError, {529}),
    ],
)
async def test_server_errors_are_retried_up_to_max_attempts(
    emulator: Any, family: str, fault: str, cls: type[Exception], statuses: set[int]
) -> None:
    emu = await emulator([emu_provider("p", family, faults={fault: 1.0})])
    results = await run_all(
        config(emu.base_url("p"), kind=family, max_attempts=3), [chat(f"x{i}") for i in range(4)]
    )
    for result in results:
        assert isinstance(result.error, cls)
        assert len(result.attempts) == 3
        assert {a.status for a in result.attempts} <= statuses
        assert all(a.error_kind == result.error.kind for a in result.attempts)
    assert emu.stats()["providers"]["p"]["admitted"] == 12


async def test_one_unlucky_request_on_a_healthy_provider_is_not_backed_off_like_a_failing_one(
    scripted: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The backoff follows the provider's run of failures: a request that fails again and again
    while the provider answers everything else waits the first step each time, and the retry
    event says the provider's streak was shorter than the request's tries."""

    def script(i: int, body: dict[str, Any]) -> Answer:
        if "poison" in str(body["messages"]):
            return Answer(500, error_body("server_error", "boom"))
        return Answer()

    server = await scripted(script)
    cfg = config(server.base_url, max_attempts=5)
    caplog.set_level(logging.DEBUG, logger="batchgate.request")
    async with Gateway(cfg) as gw:
        poisoned = asyncio.ensure_future(gw.abatch([chat("poison")]))
        answered = 0
        while not poisoned.done():  # the rest of the provider's traffic: every one answered
            results = await gw.abatch([chat(f"ok {answered + k}") for k in range(4)])
            assert all(r.ok for r in results)
            answered += len(results)
        (result,) = await poisoned
    assert isinstance(result.error, ServerError)
    assert len(result.attempts) == 5
    retries = [r.__dict__["fields"] for r in caplog.records if r.__dict__.get("event") == "retry"]
    assert [f["attempt"] for f in retries] == [1, 2, 3, 4]
    assert all(f["streak"] is not None and f["streak"] >= 1 for f in retries)
    assert any(f["streak"] < f["attempt"] for f in retries), retries  # successes came between
    base = cfg.settings.retry.base_delay
    for f in retries:
        assert f["delay_s"] <= base * 2 ** (min(f["attempt"], f["streak"]) - 1) + 1e-3, f


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("where", ["refused", "dns"])
async def test_unreachable_provider_is_taken_out_after_a_few_tries(where: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1" if where == "refused" else "http://nonexistent.invalid/v1"
    results = await run_all(config(url, max_attempts=8), [chat("a"), chat("b")])
    cause = "connection refused" if where == "refused" else "DNS failure"
    for result in results:
        assert isinstance(result.error, NoTargetLeft)
        assert f"provider p taken out: {cause}, 3 times in a row" in result.error.message
        assert set(kinds(result)) <= {"connect", "unreachable"}, kinds(result)
    assert 3 <= sum(len(r.attempts) for r in results) <= 4  # the third took it out; one was in flight


async def test_reset_mid_response_is_retried(scripted: Any) -> None:
    server = await scripted(lambda i, b: Answer(action="partial") if i == 0 else Answer())
    (result,) = await run_all(config(server.base_url), [chat("hi")])
    assert result.ok, result.error
    assert len(result.attempts) == 2
    assert result.attempts[0].error_kind in ("malformed_response", "connect")


BAD_200S: dict[str, Answer] = {
    "truncated": Answer(body=b'{"id": "x", "object": "chat.completion", "choices": [{"ind'),
    "html": Answer(body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
    "no_usage": Answer(body=b'{"object": "chat.completion", "choices": [{"message": {"content": "ok"}}]}'),
    "usage_as_text": Answer(
        body=b'{"choices": [{"message": {"content": "ok"}}], '
        b'"usage": {"prompt_tokens": "5", "completion_tokens": "1"}}'
    ),
    "negative_usage": Answer(body=b'{"choices": [], "usage": {"prompt_tokens": -5, "completion_tokens": 1}}'),
    "empty": Answer(body=b""),
    "array": Answer(body=b"[1, 2, 3]"),
}


@pytest.mark.parametrize("case", sorted(BAD_200S))
async def test_an_unusable_200_is_never_a_success(scripted: Any, case: str) -> None:
    server = await scripted(lambda i, b: BAD_200S[case])
    (result,) = await run_all(config(server.base_url, max_attempts=2), [chat("hi")])
    assert not result.ok
    assert isinstance(result.error, MalformedResponse)
    assert kinds(result) == ["malformed_response"] * 2
    assert result.usage is None


async def test_an_unusable_200_then_a_good_one_succeeds(scripted: Any) -> None:
    server = await scripted(lambda i, b: BAD_200S["html"] if i == 0 else Answer())
    (result,) = await run_all(config(server.base_url), [chat("hi")])
    assert result.ok
    assert kinds(result) == ["malformed_response", None]


async def test_a_hang_times_out_and_frees_the_only_slot(scripted: Any) -> None:
    server = await scripted(lambda i, b: Answer(action="hang") if i == 0 else Answer())
    cfg = config(server.base_url, limits={"max_concurrency": 1}, total_timeout=0.5, max_attempts=1)
    first, second = await run_all(cfg, [chat("hangs"), chat("normal")])
    assert isinstance(first.error, RequestTimeout)
    assert second.ok, second.error
    assert [a.prompt for a in server.arrivals] == [
        "hangs",
        "normal",
    ]  # one slot: strictly one after the other


# Capacity halving mid-run runs on the real clock: bench/capacity_halving.py measures it.
