"""Gemini's batch mode over real sockets: batchgate's client from an uploaded file (the resumable
Files API upload, a downloaded responses file), and the official `google-genai` SDK reading the
emulated batch operations (inline and file-based, states, cancel) on a FakeClock."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from google import genai
from google.genai import types

from batchgate.clock import FakeClock
from clocks import SteppingClock

from .helpers import batch_client, label, provider, running, sentiment_requests, session

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning"),
]
MODEL = "gemini-2.5-flash"


async def test_a_batch_too_large_to_send_inline_goes_through_an_uploaded_file() -> None:
    fake = FakeClock()
    async with running(provider("p", "gemini", processing_seconds=2.0), clock=fake) as emu, session() as http:
        client = batch_client(emu, "p", http, clock=SteppingClock(fake))
        client.inline_max_bytes = 0  # type: ignore[attr-defined]
        requests = sentiment_requests(5)
        handle = await client.submit(requests)
        final = await client.poll_until_done(handle)
        assert final.state == "completed"
        assert final.raw["metadata"]["output"]["responsesFile"].startswith("files/")
        results = await client.results(handle)
    assert sorted(r.custom_id for r in results) == [r.custom_id for r in requests]
    for result in results:
        assert result.ok
        assert result.body is not None
        assert result.body["choices"][0]["message"]["content"] == label(result.custom_id)
    batches = emu.stats()["providers"]["p"]["batches"]
    assert (batches["created"], batches["completed"]) == (1, 1)


def _sdk(base_url: str) -> genai.Client:
    options = types.HttpOptions(base_url=base_url, retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key="k", http_options=options)


async def test_the_sdk_reads_an_inline_batch_through_its_states() -> None:
    fake = FakeClock()
    async with running(provider("p", "gemini", processing_seconds=4.0), clock=fake) as emu:
        client = _sdk(emu.base_url("p"))
        src: list[types.InlinedRequestDict] = [
            {
                "contents": [{"role": "user", "parts": [{"text": "Classify: I loved it, wonderful"}]}],
                "metadata": {"key": "a"},
            },
            {
                "contents": [{"role": "user", "parts": [{"text": "Classify: terrible and boring"}]}],
                "metadata": {"key": "b"},
            },
        ]
        job = await client.aio.batches.create(model=MODEL, src=src, config={"display_name": "reviews"})
        assert job.state == types.JobState.JOB_STATE_PENDING
        assert job.name is not None
        fake.advance(2.0)
        assert (await client.aio.batches.get(name=job.name)).state == types.JobState.JOB_STATE_RUNNING
        fake.advance(2.0)
        done = await client.aio.batches.get(name=job.name)
    assert done.state == types.JobState.JOB_STATE_SUCCEEDED
    assert done.display_name == "reviews"
    assert done.dest is not None
    assert done.dest.inlined_responses is not None
    answers = {
        r.metadata["key"]: r.response.text for r in done.dest.inlined_responses if r.metadata and r.response
    }
    assert answers == {"a": "positive", "b": "negative"}


async def test_the_sdk_cancels_a_batch() -> None:
    fake = FakeClock()
    async with running(provider("p", "gemini", processing_seconds=10.0), clock=fake) as emu:
        client = _sdk(emu.base_url("p"))
        src: list[types.InlinedRequestDict] = [
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        ] * 4
        job = await client.aio.batches.create(model=MODEL, src=src)
        assert job.name is not None
        await client.aio.batches.cancel(name=job.name)
        fake.advance(0.1)
        cancelled = await client.aio.batches.get(name=job.name)
    assert cancelled.state == types.JobState.JOB_STATE_CANCELLED


async def test_the_sdk_runs_a_file_batch(tmp_path: Path) -> None:
    fake = FakeClock()
    lines = [
        {
            "key": f"k{i}",
            "request": {"contents": [{"role": "user", "parts": [{"text": "Classify: great fun"}]}]},
        }
        for i in range(3)
    ]
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    async with running(provider("p", "gemini", processing_seconds=1.0), clock=fake) as emu:
        client = _sdk(emu.base_url("p"))
        uploaded = await client.aio.files.upload(file=str(path), config={"mime_type": "jsonl"})
        assert uploaded.name is not None
        job = await client.aio.batches.create(model=MODEL, src=uploaded.name)
        assert job.name is not None
        fake.advance(1.0)
        done = await client.aio.batches.get(name=job.name)
        assert done.state == types.JobState.JOB_STATE_SUCCEEDED
        assert done.dest is not None
        assert done.dest.file_name is not None
        data = await client.aio.files.download(file=done.dest.file_name)
    assert data is not None
    rows = [orjson.loads(line) for line in data.splitlines()]
    assert sorted(r["key"] for r in rows) == ["k0", "k1", "k2"]
    assert all(r["response"]["candidates"][0]["content"]["parts"][0]["text"] == "positive" for r in rows)
