"""The emulated OpenAI Batch API for each endpoint (chat, embeddings, Responses, completions), read
by the official `openai` SDK over a real socket: each line answered in its endpoint's body shape
(parsed by the SDK's own types) with its usage; one endpoint per batch (PROTOCOLS.md)."""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest
from openai.types import Completion, CreateEmbeddingResponse
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from batchgate.clock import FakeClock
from batchgate.emulator import Emulator, embedding_vector
from batchgate.tokens import ExactTokenCounter

from .helpers import provider, running
from .test_batch_sdk import jsonl, oa

pytestmark = pytest.mark.integration

TEXTS = ("the cat sat", "on the mat", "a quiet river")
BODIES: dict[str, Any] = {
    "/v1/chat/completions": lambda i: {
        "model": "m",
        "messages": [{"role": "user", "content": f"Say something about {TEXTS[i]}"}],
        "max_tokens": 8,
    },
    "/v1/embeddings": lambda i: {"model": "m", "input": [TEXTS[i], TEXTS[(i + 1) % 3]], "dimensions": 8},
    "/v1/responses": lambda i: {
        "model": "m",
        "instructions": "Be brief.",
        "input": f"Say something about {TEXTS[i]}",
        "max_output_tokens": 4,
    },
    "/v1/completions": lambda i: {"model": "m", "prompt": f"Once upon {TEXTS[i]}", "max_tokens": 6},
}
TYPES: dict[str, Any] = {
    "/v1/chat/completions": ChatCompletion,
    "/v1/embeddings": CreateEmbeddingResponse,
    "/v1/responses": Response,
    "/v1/completions": Completion,
}


def line(url: str, i: int) -> dict[str, Any]:
    return {"custom_id": f"r{i}", "method": "POST", "url": url, "body": BODIES[url](i)}


async def _batch(client: openai.AsyncOpenAI, url: str, lines: list[Any]) -> str:
    uploaded = await client.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
    batch = await client.batches.create(input_file_id=uploaded.id, endpoint=url, completion_window="24h")  # type: ignore[arg-type]
    assert batch.endpoint == url
    return batch.id


async def _output(client: openai.AsyncOpenAI, file_id: str | None) -> dict[str, Any]:
    assert file_id is not None
    content = await client.files.content(file_id)
    return {o["custom_id"]: o for o in map(orjson.loads, content.text.splitlines())}


async def _live(emu: Emulator, url: str, i: int) -> Any:
    """The live answer to the same body, through the emulator's own endpoint."""
    async with oa(emu) as client:
        raw = await client.post(url.removeprefix("/v1"), body=BODIES[url](i), cast_to=object)
    return TYPES[url].model_validate(raw)


def _text(answer: Any) -> str:
    if isinstance(answer, ChatCompletion):
        return answer.choices[0].message.content or ""
    if isinstance(answer, Response):
        return answer.output_text
    assert isinstance(answer, Completion)
    return answer.choices[0].text


@pytest.mark.parametrize("url", list(BODIES))
async def test_each_endpoint_s_batch_answers_in_its_shape_with_its_usage(url: str) -> None:
    clock = FakeClock()
    async with (
        running(provider("oa", "openai", processing_seconds=3.0), clock=clock) as emu,
        oa(emu) as client,
    ):
        batch_id = await _batch(client, url, [line(url, i) for i in range(3)])
        clock.advance(3.0)
        batch = await client.batches.retrieve(batch_id)
        assert (batch.status, batch.endpoint, batch.errors) == ("completed", url, None)
        assert batch.request_counts is not None
        assert batch.request_counts.completed == 3
        out = await _output(client, batch.output_file_id)
        assert batch.error_file_id is None
        answers = {cid: TYPES[url].model_validate(o["response"]["body"]) for cid, o in out.items()}
        assert sorted(answers) == ["r0", "r1", "r2"]
        live = await _live(emu, url, 1)
    usage = batch.usage
    assert usage is not None
    if url == "/v1/embeddings":
        for i in range(3):
            vectors = [d.embedding for d in answers[f"r{i}"].data]
            assert vectors == [embedding_vector(TEXTS[i], 8), embedding_vector(TEXTS[(i + 1) % 3], 8)]
        count = ExactTokenCounter().count_text
        assert answers["r0"].usage.prompt_tokens == count(TEXTS[0]) + count(TEXTS[1])
        assert usage.output_tokens == 0  # embeddings charge input tokens only
        assert usage.input_tokens == sum(a.usage.prompt_tokens for a in answers.values())
    else:
        got = answers["r1"]
        assert (_text(got), got.usage) == (_text(live), live.usage)  # as the live endpoint answers
        assert usage.output_tokens > 0
    if url == "/v1/responses":
        assert {a.status for a in answers.values()} == {"incomplete"}  # max_output_tokens 4 cuts it
        assert usage.input_tokens == sum(a.usage.input_tokens for a in answers.values())
        assert usage.output_tokens == sum(a.usage.output_tokens for a in answers.values())


async def test_a_batch_names_one_endpoint_and_each_line_s_url_must_be_it() -> None:
    clock = FakeClock()
    mixed = [line("/v1/embeddings", 0), line("/v1/responses", 1), line("/v1/embeddings", 2)]
    async with running(provider("oa", "openai"), clock=clock) as emu, oa(emu) as client:
        batch_id = await _batch(client, "/v1/embeddings", mixed)
        clock.advance(0)
        batch = await client.batches.retrieve(batch_id)
        assert batch.status == "failed"
        assert batch.errors is not None
        assert batch.errors.data is not None
        assert [(e.line, e.code) for e in batch.errors.data] == [(2, "invalid_url")]
        uploaded = await client.files.create(file=("x.jsonl", jsonl(mixed[:1])), purpose="batch")
        with pytest.raises(openai.BadRequestError) as refused:
            await client.batches.create(
                input_file_id=uploaded.id,
                endpoint="/v1/moderations",
                completion_window="24h",
            )
        assert refused.value.param == "endpoint"
        assert emu.stats()["providers"]["oa"]["batches"]["failed"] == 1


async def test_an_embeddings_batch_over_50000_inputs_fails_whole() -> None:
    clock = FakeClock()
    lines = [
        {
            "custom_id": f"e{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "m", "input": ["a"] * 2048},
        }
        for i in range(25)  # 51,200 inputs
    ]
    async with running(provider("oa", "openai"), clock=clock) as emu, oa(emu) as client:
        batch_id = await _batch(client, "/v1/embeddings", lines)
        clock.advance(0)
        batch = await client.batches.retrieve(batch_id)
        assert batch.status == "failed"
        assert batch.errors is not None
        assert batch.errors.data is not None
        assert [e.code for e in batch.errors.data] == ["too_many_embedding_inputs"]
        ok = await _batch(client, "/v1/embeddings", lines[:24])  # 49,152 inputs
        clock.advance(0)
        assert (await client.batches.retrieve(ok)).status == "in_progress"
        assert emu.stats()["providers"]["oa"]["batches"]["failed"] == 1


async def test_an_invalid_body_is_answered_in_the_error_file_as_the_live_endpoint_would() -> None:
    clock = FakeClock()
    bad = {"custom_id": "bad", "method": "POST", "url": "/v1/responses", "body": {"model": "m"}}
    async with (
        running(provider("oa", "openai", processing_seconds=1.0), clock=clock) as emu,
        oa(emu) as client,
    ):
        batch_id = await _batch(client, "/v1/responses", [line("/v1/responses", 0), bad])
        clock.advance(1.0)
        batch = await client.batches.retrieve(batch_id)
        assert batch.status == "completed"
        errors = await _output(client, batch.error_file_id)
        assert errors["bad"]["response"]["status_code"] == 400
        assert errors["bad"]["response"]["body"]["error"]["param"] == "input"
        with pytest.raises(openai.BadRequestError) as refused:
            await client.post("/responses", body={"model": "m"}, cast_to=object)
        assert refused.value.param == "input"
