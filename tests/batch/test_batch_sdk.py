"""The official `openai` and `anthropic` SDKs read the emulated Batch APIs over a real socket.

The emulator runs on a FakeClock, so each lifecycle step is reached by advancing time exactly."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
import pytest

from batchgate.clock import FakeClock
from batchgate.emulator import Emulator

from .helpers import label, provider, running

pytestmark = pytest.mark.integration


def jsonl(lines: list[Any]) -> bytes:
    return b"".join((x if isinstance(x, bytes) else orjson.dumps(x)) + b"\n" for x in lines)


def chat_line(i: int, **body: Any) -> dict[str, Any]:
    review = ("I loved it, wonderful", "terrible and boring", "it was a film", "great fun")[i % 4]
    return {
        "custom_id": f"r{i}",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "gpt-x",
            "messages": [{"role": "user", "content": f"Classify the sentiment: {review}"}],
            "max_tokens": 10,
            **body,
        },
    }


def oa(emu: Emulator, name: str = "oa") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=emu.base_url(name), api_key="x", max_retries=0)


def an(emu: Emulator, name: str = "an") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=emu.base_url(name), api_key="x", max_retries=0)


async def _openai_batch(client: openai.AsyncOpenAI, lines: list[Any]) -> str:
    uploaded = await client.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch")
    assert (uploaded.purpose, uploaded.bytes, uploaded.status) == ("batch", len(jsonl(lines)), "processed")
    batch = await client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"k": "v"},
    )
    assert batch.status == "validating"
    assert batch.metadata == {"k": "v"}
    return batch.id


async def _lines(client: openai.AsyncOpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    content = await client.files.content(file_id)
    return [orjson.loads(line) for line in content.text.splitlines()]


async def test_openai_sdk_completed_lifecycle_matches_live_answers() -> None:
    clock = FakeClock()
    async with (
        running(provider("oa", "openai", processing_seconds=10.0), clock=clock) as emu,
        oa(emu) as client,
    ):
        batch_id = await _openai_batch(
            client, [chat_line(i) for i in range(4)] + [chat_line(4, temperature=5)]
        )
        clock.advance(0)
        batch = await client.batches.retrieve(batch_id)
        assert (batch.status, batch.in_progress_at) == ("in_progress", batch.created_at)
        clock.advance(4.0)  # 2 of 5 requests are due
        batch = await client.batches.retrieve(batch_id)
        assert batch.request_counts is not None
        assert (batch.request_counts.total, batch.request_counts.completed) == (5, 2)
        clock.advance(6.0)
        batch = await client.batches.retrieve(batch_id)
        assert batch.status == "completed"
        assert batch.request_counts is not None
        assert (batch.request_counts.completed, batch.request_counts.failed) == (4, 1)
        assert batch.completed_at is not None
        assert batch.output_file_id is not None
        output = await _lines(client, batch.output_file_id)
        assert sorted(line["custom_id"] for line in output) == ["r0", "r1", "r2", "r3"]
        for line in output:
            assert line["error"] is None
            assert line["response"]["status_code"] == 200
            assert line["response"]["body"]["choices"][0]["message"]["content"] == label(line["custom_id"])
        [refused] = await _lines(client, batch.error_file_id)
        assert refused["custom_id"] == "r4"
        assert refused["response"]["status_code"] == 400
        assert refused["response"]["body"]["error"]["code"] == "decimal_out_of_range"
        live = await client.chat.completions.create(**chat_line(0)["body"])
        first = next(line for line in output if line["custom_id"] == "r0")["response"]["body"]
        assert first["choices"][0]["message"]["content"] == live.choices[0].message.content
        assert live.usage is not None
        assert first["usage"]["prompt_tokens"] == live.usage.prompt_tokens
        output_file = await client.files.retrieve(batch.output_file_id)
        assert output_file.purpose == "batch_output"
        listed = await client.batches.list()
        assert [b.id for b in listed.data] == [batch_id]
        stats = emu.stats()["providers"]["oa"]["batches"]
        assert (stats["created"], stats["completed"], stats["requests_processed"]) == (1, 1, 5)


async def test_openai_sdk_failed_validation_names_each_bad_line() -> None:
    clock = FakeClock()
    wrong_url = {**chat_line(2), "url": "/v1/embeddings"}
    wrong_method = {**chat_line(3), "method": "GET"}
    other_model = chat_line(6, model="gpt-y")
    lines: list[Any] = [
        chat_line(0),
        b"{not json",
        chat_line(0),
        wrong_url,
        wrong_method,
        chat_line(5),
        other_model,
    ]
    async with running(provider("oa", "openai"), clock=clock) as emu, oa(emu) as client:
        batch_id = await _openai_batch(client, lines)
        clock.advance(0)
        batch = await client.batches.retrieve(batch_id)
        assert batch.status == "failed"
        assert batch.failed_at is not None
        assert batch.errors is not None
        assert batch.errors.data is not None
        found = [(e.line, e.code) for e in batch.errors.data]
        assert found == [
            (2, "invalid_json_line"),
            (3, "duplicate_custom_id"),
            (4, "invalid_url"),
            (5, "invalid_method"),
            (7, "mismatched_model"),
        ]
        assert (batch.output_file_id, batch.error_file_id) == (None, None)
        assert emu.stats()["providers"]["oa"]["batches"]["failed"] == 1


async def test_openai_sdk_expired_returns_the_completed_part() -> None:
    clock = FakeClock()
    spec = provider("oa", "openai", processing_seconds=10.0, expire_after_seconds=4.0)
    async with running(spec, clock=clock) as emu, oa(emu) as client:
        batch_id = await _openai_batch(client, [chat_line(i) for i in range(10)])
        clock.advance(5.0)
        batch = await client.batches.retrieve(batch_id)
        assert batch.status == "expired"
        assert batch.expired_at is not None
        assert batch.request_counts is not None
        assert (batch.request_counts.completed, batch.request_counts.failed) == (4, 6)
        assert len(await _lines(client, batch.output_file_id)) == 4
        errors = await _lines(client, batch.error_file_id)
        assert {e["error"]["code"] for e in errors} == {"batch_expired"}
        assert len(errors) == 6
        assert emu.stats()["providers"]["oa"]["batches"]["expired"] == 1


async def test_openai_sdk_cancel_keeps_processed_lines() -> None:
    clock = FakeClock()
    async with (
        running(provider("oa", "openai", processing_seconds=10.0), clock=clock) as emu,
        oa(emu) as client,
    ):
        batch_id = await _openai_batch(client, [chat_line(i) for i in range(10)])
        clock.advance(3.0)
        cancelling = await client.batches.cancel(batch_id)
        assert cancelling.status == "cancelling"
        assert cancelling.cancelling_at is not None
        clock.advance(0)
        batch = await client.batches.retrieve(batch_id)
        assert batch.status == "cancelled"
        assert len(await _lines(client, batch.output_file_id)) == 3
        errors = await _lines(client, batch.error_file_id)
        assert [e["error"]["code"] for e in errors] == ["batch_cancelled"] * 7
        with pytest.raises(openai.BadRequestError):
            await client.batches.cancel(batch_id)
        assert emu.stats()["providers"]["oa"]["batches"]["cancelled"] == 1


async def test_openai_sdk_quota_and_size_limits() -> None:
    clock = FakeClock()
    spec = provider("oa", "openai", processing_seconds=10.0, enqueued_token_limit=100, max_requests=3)
    long = {"messages": [{"role": "user", "content": "word " * 60}]}
    async with running(spec, clock=clock) as emu, oa(emu) as client:
        await _openai_batch(client, [chat_line(0, **long)])
        assert 50 < emu.stats()["providers"]["oa"]["batches"]["enqueued_tokens"] <= 100
        second = await client.files.create(file=("b.jsonl", jsonl([chat_line(1, **long)])), purpose="batch")
        with pytest.raises(openai.RateLimitError) as refused:
            await client.batches.create(
                input_file_id=second.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
        assert refused.value.code == "token_limit_exceeded"
        with pytest.raises(openai.BadRequestError) as too_many:
            await client.files.create(
                file=("c.jsonl", jsonl([chat_line(i) for i in range(4)])), purpose="batch"
            )
        assert too_many.value.code == "too_many_requests"
        clock.advance(11.0)  # the first batch ends and frees its tokens
        retried = await client.batches.create(
            input_file_id=second.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert retried.status == "validating"
        stats = emu.stats()["providers"]["oa"]["batches"]
        assert (stats["created"], stats["refused"], stats["rejected"]) == (2, 1, 1)


async def test_openai_sdk_file_size_limit() -> None:
    async with running(provider("oa", "openai", max_bytes=500)) as emu, oa(emu) as client:
        with pytest.raises(openai.BadRequestError) as too_big:
            await client.files.create(
                file=("a.jsonl", jsonl([chat_line(i) for i in range(4)])), purpose="batch"
            )
        assert too_big.value.code == "file_too_large"


def an_request(i: int, **params: Any) -> Any:  # an SDK Request TypedDict
    review = ("I loved it, wonderful", "terrible and boring", "it was a film", "great fun")[i % 4]
    return {
        "custom_id": f"r{i}",
        "params": {
            "model": "claude-x",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": f"Classify the sentiment: {review}"}],
            **params,
        },
    }


async def test_anthropic_sdk_lifecycle_results_and_errored_lines() -> None:
    clock = FakeClock()
    bad = an_request(4, messages=[{"role": "assistant", "content": "hi"}])
    async with (
        running(provider("an", "anthropic", processing_seconds=10.0), clock=clock) as emu,
        an(emu) as client,
    ):
        created = await client.messages.batches.create(requests=[an_request(i) for i in range(4)] + [bad])
        assert created.processing_status == "in_progress"
        assert created.request_counts.processing == 5
        assert created.results_url is None
        clock.advance(5.0)
        middle = await client.messages.batches.retrieve(created.id)
        assert (middle.processing_status, middle.request_counts.processing) == ("in_progress", 5)
        clock.advance(5.0)
        ended = await client.messages.batches.retrieve(created.id)
        assert ended.processing_status == "ended"
        assert ended.ended_at is not None
        assert (ended.request_counts.succeeded, ended.request_counts.errored) == (4, 1)
        assert ended.results_url is not None
        results = {r.custom_id: r.result async for r in await client.messages.batches.results(created.id)}
        assert sorted(results) == ["r0", "r1", "r2", "r3", "r4"]
        for custom_id in ("r0", "r1", "r2", "r3"):
            result = results[custom_id]
            assert result.type == "succeeded"
            block = result.message.content[0]
            assert block.type == "text"
            assert block.text == label(custom_id)
        errored = results["r4"]
        assert errored.type == "errored"
        assert errored.error.error.type == "invalid_request_error"
        listed = await client.messages.batches.list()
        assert [b.id for b in listed.data] == [created.id]
        assert emu.stats()["providers"]["an"]["batches"]["completed"] == 1


async def test_anthropic_sdk_cancel_and_expiry_keep_processed_results() -> None:
    clock = FakeClock()
    spec = provider("an", "anthropic", processing_seconds=10.0, expire_after_seconds=6.0)
    async with running(spec, clock=clock) as emu, an(emu) as client:
        to_cancel = await client.messages.batches.create(requests=[an_request(i) for i in range(10)])
        to_expire = await client.messages.batches.create(requests=[an_request(i) for i in range(10)])
        clock.advance(3.0)
        canceling = await client.messages.batches.cancel(to_cancel.id)
        assert canceling.processing_status == "canceling"
        assert canceling.cancel_initiated_at is not None
        clock.advance(4.0)  # the cancel takes effect; the other batch expires at 6 s
        cancelled = await client.messages.batches.retrieve(to_cancel.id)
        assert (cancelled.request_counts.succeeded, cancelled.request_counts.canceled) == (3, 7)
        expired = await client.messages.batches.retrieve(to_expire.id)
        assert (expired.request_counts.succeeded, expired.request_counts.expired) == (6, 4)
        kinds = [r.result.type async for r in await client.messages.batches.results(to_expire.id)]
        assert sorted(kinds) == ["expired"] * 4 + ["succeeded"] * 6
        stats = emu.stats()["providers"]["an"]["batches"]
        assert (stats["cancelled"], stats["expired"], stats["enqueued_tokens"]) == (1, 1, 0)


async def test_anthropic_sdk_refusals() -> None:
    spec = provider("an", "anthropic", enqueued_token_limit=100, max_requests=3)
    long = {"messages": [{"role": "user", "content": "word " * 60}]}
    async with running(spec) as emu, an(emu) as client:
        await client.messages.batches.create(requests=[an_request(0, **long)])
        with pytest.raises(anthropic.RateLimitError):
            await client.messages.batches.create(requests=[an_request(1, **long)])
        with pytest.raises(anthropic.BadRequestError, match="at most 3"):
            await client.messages.batches.create(requests=[an_request(i) for i in range(4)])
        with pytest.raises(anthropic.BadRequestError, match="duplicate"):
            await client.messages.batches.create(requests=[an_request(0), an_request(0)])
        spaced = an_request(0)
        spaced["custom_id"] = "has space"
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            await client.messages.batches.create(requests=[spaced])
        assert emu.stats()["providers"]["an"]["batches"]["refused"] == 1
