"""batchgate's Batch API clients against the emulator over real sockets: the conformance suite of
the one `BatchClient` seam, every lifecycle path for every kind the factory makes. Most tests run
the emulator on a FakeClock driven by the client's own poll sleeps (`SteppingClock`), so partial
results are exact; one runs on real time end to end."""

from __future__ import annotations

from typing import Literal

import pytest

from batchgate.clock import FakeClock, LoopClock
from batchgate.config import ProviderConfig
from batchgate.endpoints import ENDPOINT_KEY
from batchgate.errors import BadRequestError, BatchgateError, RateLimitError
from batchgate.policy.poll import PollPolicy
from batchgate.providers import make_chat_client
from batchgate.providers.batch.common import KINDS, BatchClient, BatchHandle, BatchRequest, BatchStatus
from batchgate.providers.http import SessionTransport
from clocks import SteppingClock

from .helpers import (
    TIMEOUTS,
    batch_client,
    emulated,
    label,
    provider,
    running,
    sentiment_requests,
    session,
)

pytestmark = pytest.mark.integration
kinds = pytest.mark.parametrize("kind", KINDS)  # every kind the factory makes
Kind = Literal["openai", "anthropic", "azure", "gemini"]


@kinds
async def test_completed_on_real_time_with_live_identical_answers(kind: Kind) -> None:
    fast = PollPolicy(initial=0.05, factor=2.0, maximum=0.2)
    requests = sentiment_requests(6)
    async with running(provider("p", kind, processing_seconds=0.3)) as emu, session() as http:
        client = batch_client(emu, "p", http, clock=LoopClock(), poll=fast)
        handle = await client.submit(requests)
        assert (handle.provider, handle.kind) == ("p", kind)
        seen: list[BatchStatus] = []
        final = await client.poll_until_done(handle, on_status=seen.append)
        assert final.state == "completed"
        assert final.counts.succeeded == 6
        assert seen[0].state == "in_progress"
        results = await client.results(handle)
        assert sorted(r.custom_id for r in results) == sorted(r.custom_id for r in requests)
        live_client = make_chat_client(
            emulated("p", kind),
            SessionTransport(http),
            TIMEOUTS,
            base_url=emu.base_url("p"),
        )
        live = await live_client.send(dict(requests[0].body), model="gpt-x")
        for result in results:
            assert result.ok
            assert result.body is not None
            assert result.body["object"] == "chat.completion"
            assert result.body["choices"][0]["message"]["content"] == label(result.custom_id)
            assert result.usage is not None
            assert result.usage.completion_tokens >= 1
        first = next(r for r in results if r.custom_id == "r0")
        assert first.usage == live.usage
        assert first.body is not None
        assert first.body["choices"][0]["message"]["content"] == live.body["choices"][0]["message"]["content"]


@kinds
async def test_resume_from_a_persisted_handle_polls_with_growing_intervals(kind: Kind) -> None:
    fake = FakeClock()
    async with running(provider("p", kind, processing_seconds=10.0), clock=fake) as emu:
        async with session() as http:
            saved = (await batch_client(emu, "p", http).submit(sentiment_requests(3))).to_dict()
        async with session() as http:  # a new process: only the saved handle survives
            clock = SteppingClock(fake)
            client = batch_client(emu, "p", http, clock=clock, poll=PollPolicy(1.0, 2.0, 4.0))
            handle = BatchHandle.from_dict(saved)
            final = await client.poll_until_done(handle)
            assert final.state == "completed"
            assert clock.sleeps == [1.0, 2.0, 4.0, 4.0]  # t = 1, 3, 7, 11: done at 10
            assert sorted(r.custom_id for r in await client.results(handle)) == ["r0", "r1", "r2"]


@kinds
async def test_expired_returns_the_completed_part(kind: Kind) -> None:
    fake = FakeClock()
    spec = provider("p", kind, processing_seconds=10.0, expire_after_seconds=4.0)
    async with running(spec, clock=fake) as emu, session() as http:
        client = batch_client(emu, "p", http, clock=SteppingClock(fake))
        handle = await client.submit(sentiment_requests(10))
        final = await client.poll_until_done(handle)
        assert final.state == "expired"
        results = await client.results(handle)
        ok = sorted(r.custom_id for r in results if r.ok)
        assert len(ok) == 4
        expired = [r for r in results if not r.ok]
        if kind == "gemini":  # Gemini's output holds what was processed; the runner retries the rest
            assert not expired
            assert final.counts.expired == 6
            return
        assert len(expired) == 6
        assert {r.error.code for r in expired if r.error} == {"batch_expired"}
        assert set(ok).isdisjoint(r.custom_id for r in expired)
        assert emu.stats()["providers"]["p"]["batches"]["expired"] == 1


@kinds
async def test_cancel_keeps_processed_results(kind: Kind) -> None:
    fake = FakeClock()
    async with running(provider("p", kind, processing_seconds=10.0), clock=fake) as emu, session() as http:
        client = batch_client(emu, "p", http, clock=SteppingClock(fake))
        handle = await client.submit(sentiment_requests(10))
        fake.advance(5.0)
        cancelling = await client.cancel(handle)
        assert cancelling.state == "in_progress"  # cancelling / canceling: not ended yet
        final = await client.poll_until_done(handle)
        assert final.state == "cancelled"
        results = await client.results(handle)
        assert sum(r.ok for r in results) == 5
        if kind == "gemini":  # the processed part only (the runner retries the rest)
            assert (len(results), final.counts.cancelled) == (5, 5)
            return
        assert {r.error.code for r in results if r.error} == {"batch_cancelled"}
        assert len(results) == 10
        assert emu.stats()["providers"]["p"]["batches"]["cancelled"] == 1


async def test_openai_failed_validation() -> None:
    fake = FakeClock()
    spec = provider("p", "openai", fail_validation=True)
    async with running(spec, clock=fake) as emu, session() as http:
        client = batch_client(emu, "p", http, clock=SteppingClock(fake))
        handle = await client.submit(sentiment_requests(2))
        final = await client.poll_until_done(handle)
        assert final.state == "failed"
        assert final.raw["errors"]["data"][0]["code"] == "invalid_file"
        assert await client.results(handle) == []


async def test_anthropic_failed_validation_is_refused_at_creation() -> None:
    async with running(provider("p", "anthropic", fail_validation=True)) as emu, session() as http:
        with pytest.raises(BadRequestError, match="HTTP 400"):
            await batch_client(emu, "p", http).submit(sentiment_requests(2))


@kinds
async def test_per_line_errors_come_from_chat_validation(kind: Kind) -> None:
    fake = FakeClock()
    bad_body = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}], "temperature": 5}
    if kind == "anthropic":  # passes translation, refused by the Messages validation
        bad_body = {"model": "gpt-x", "messages": [{"role": "user", "content": ""}], "max_tokens": 5}
    requests = [*sentiment_requests(2), BatchRequest("bad", bad_body)]
    async with running(provider("p", kind, processing_seconds=1.0), clock=fake) as emu, session() as http:
        client = batch_client(emu, "p", http, clock=SteppingClock(fake))
        handle = await client.submit(requests)
        final = await client.poll_until_done(handle)
        assert final.state == "completed"
        assert (final.counts.succeeded, final.counts.errored) == (2, 1)
        by_id = {r.custom_id: r for r in await client.results(handle)}
        bad = by_id["bad"]
        assert not bad.ok
        assert bad.error is not None
        expected = {"anthropic": "invalid_request_error", "gemini": "INVALID_ARGUMENT"}.get(
            kind, "decimal_out_of_range"
        )
        assert bad.error.code == expected
        assert by_id["r0"].ok


@kinds
async def test_creation_over_the_enqueued_token_quota_is_a_rate_limit(kind: Kind) -> None:
    fake = FakeClock()
    long = [{"role": "user", "content": "word " * 60}]
    big = [BatchRequest("a", {"model": "m", "messages": long, "max_tokens": 5})]
    huge = [BatchRequest(f"h{i}", {"model": "m", "messages": long, "max_tokens": 5}) for i in range(2)]
    spec = provider("p", kind, processing_seconds=10.0, enqueued_token_limit=100)
    async with running(spec, clock=fake) as emu, session() as http:
        client = batch_client(emu, "p", http, clock=SteppingClock(fake))
        first = await client.submit(big)
        with pytest.raises(RateLimitError) as refused:
            await client.submit(big)
        assert refused.value.status == 429
        with pytest.raises(BadRequestError):  # can never fit: refused for good, not a 429
            await client.submit(huge)
        await client.poll_until_done(first)  # its tokens are released when it ends
        again = await client.submit(big)
        assert again.batch_id != first.batch_id
        stats = emu.stats()["providers"]["p"]["batches"]
        assert (stats["created"], stats["refused"]) == (2, 1)


@kinds
@pytest.mark.parametrize("limit", ["max_requests", "max_bytes"])
async def test_oversize_input_is_refused_then_split_into_several_batches(kind: Kind, limit: str) -> None:
    fake = FakeClock()
    requests = sentiment_requests(10)
    value = 4 if limit == "max_requests" else 700
    spec = provider("p", kind, processing_seconds=2.0, **{limit: value})
    async with running(spec, clock=fake) as emu, session() as http:
        assert batch_client(emu, "p", http).split(requests) == [requests]  # the documented limits
        client = batch_client(emu, "p", http, clock=SteppingClock(fake))
        setattr(client, limit, value)
        with pytest.raises(BadRequestError, match="HTTP 400"):
            await client.submit(requests)
        parts = client.split(requests)
        assert len(parts) >= 2
        assert [r for part in parts for r in part] == requests
        handles = [await client.submit(part) for part in parts]
        results = []
        for handle in handles:
            assert (await client.poll_until_done(handle)).state == "completed"
            results.extend(await client.results(handle))
        assert sorted(r.custom_id for r in results) == sorted(r.custom_id for r in requests)
        assert all(r.ok for r in results)
        assert emu.stats()["providers"]["p"]["batches"]["created"] == len(parts)


@kinds
async def test_results_before_the_end_and_foreign_handles_are_refused(kind: Kind) -> None:
    fake = FakeClock()
    async with (
        running(provider("p", kind, processing_seconds=10.0), clock=fake) as emu,
        session() as http,
    ):
        client = batch_client(emu, "p", http, clock=SteppingClock(fake))
        assert isinstance(client, BatchClient)
        handle = await client.submit(sentiment_requests(2))
        with pytest.raises(BatchgateError, match="has not ended"):
            await client.results(handle)
        other = next(k for k in KINDS if k != kind)
        with pytest.raises(ValueError, match="another provider"):
            await client.status(BatchHandle("p", handle.batch_id, other))
        with pytest.raises(ValueError, match="another provider"):
            await client.cancel(BatchHandle("q", handle.batch_id, kind))
        with pytest.raises(BadRequestError, match="names no model"):
            await client.submit([BatchRequest("x", {"messages": [{"role": "user", "content": "hi"}]})])


async def test_the_openai_client_batches_each_endpoint_and_reads_its_usage() -> None:
    bodies = {
        "embeddings": {"model": "e", "input": ["a cat", "a dog"], "dimensions": 4},
        "responses": {"model": "m", "input": "Classify the sentiment: I loved it", "max_output_tokens": 9},
        "completions": {"model": "m", "prompt": "Classify the sentiment: terrible", "max_tokens": 9},
    }
    fast = PollPolicy(initial=0.05, factor=2.0, maximum=0.2)
    async with running(provider("p", "openai", processing_seconds=0.1)) as emu, session() as http:
        client = batch_client(emu, "p", http, clock=LoopClock(), poll=fast)
        with pytest.raises(ValueError, match="one endpoint per batch"):
            await client.submit([BatchRequest(f"{e}", {**b, ENDPOINT_KEY: e}) for e, b in bodies.items()])
        for endpoint, body in bodies.items():
            handle = await client.submit([BatchRequest("x", {**body, ENDPOINT_KEY: endpoint})])
            assert (await client.poll_until_done(handle)).state == "completed"
            (result,) = await client.results(handle)
            live = await make_chat_client(
                ProviderConfig(name="p", kind="openai", base_url="emulator"),
                SessionTransport(http),
                TIMEOUTS,
                base_url=emu.base_url("p"),
            ).send({**body, ENDPOINT_KEY: endpoint}, model=str(body["model"]))
            assert result.ok, result.error
            assert result.body is not None
            assert result.body["object"] == live.body["object"]
            assert result.usage == live.usage
            assert result.usage is not None
            assert result.usage.prompt_tokens > 0
            assert (result.usage.completion_tokens > 0) is (endpoint != "embeddings")
    batches = emu.stats()["providers"]["p"]["batches"]
    assert (batches["created"], batches["completed"]) == (3, 3)
