"""The Python API sends embeddings, Responses and completions bodies too (issue 29): a request's
`url` names its endpoint, as a batch line's does; the answer comes back in the endpoint's shape,
an unknown `url` or a body the endpoint cannot take is refused before anything is sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from batchgate.emulator import embedding_vector
from batchgate.errors import BadRequestError, InvalidRequestError
from batchgate.gateway import Gateway

from .conftest import chat, emu_provider, gateway_config

pytestmark = pytest.mark.integration

Start = Callable[..., Any]
SENTIMENT = "Classify the sentiment of this review: I loved it"


async def test_each_endpoint_through_the_gateway(emulator: Start) -> None:
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    requests = [
        {"url": "/v1/embeddings", "model": "m", "input": ["one", "two"], "dimensions": 4, "custom_id": "e"},
        {"url": "/v1/responses", "model": "m", "input": SENTIMENT, "max_output_tokens": 10},
        {"url": "/v1/completions", "model": "m", "prompt": SENTIMENT, "max_tokens": 10},
        chat(SENTIMENT),
    ]
    async with Gateway(cfg) as gw:
        results = await gw.abatch(requests)
        estimate = gw.estimate({"url": "/v1/embeddings", "model": "m", "input": "one"})
    assert all(r.ok for r in results), [r.error for r in results]
    embedded, responded, completed, chatted = results
    assert embedded.custom_id == "e"
    assert embedded.body is not None
    assert [d["embedding"] for d in embedded.body["data"]] == [embedding_vector(t, 4) for t in ("one", "two")]
    assert embedded.usage is not None
    assert (embedded.usage.prompt_tokens, embedded.usage.completion_tokens) == (2, 0)
    assert [responded.text, completed.text, chatted.text] == ["positive"] * 3
    assert responded.body is not None
    assert responded.body["object"] == "response"
    assert estimate.max_output_tokens == 0  # embeddings reserve no output


async def test_what_an_endpoint_cannot_take_is_never_sent(emulator: Start) -> None:
    providers = [emu_provider("alpha"), emu_provider("gamma", "anthropic")]
    emu = await emulator(providers)
    routes = [{"model": "m", "targets": ["alpha"]}, {"model": "a", "targets": ["gamma:claude-x"]}]
    cfg = gateway_config(emu, providers, routes)
    async with Gateway(cfg) as gw:
        unknown = await gw.arun({"url": "/v1/moderations", "model": "m", "input": "x"})
        no_input = await gw.arun({"url": "/v1/embeddings", "model": "m"})
        anthropic = await gw.arun({"url": "/v1/embeddings", "model": "a", "input": "x"})
    assert isinstance(unknown.error, InvalidRequestError)
    assert "url must be one of /v1/chat/completions" in str(unknown.error)
    assert isinstance(no_input.error, InvalidRequestError)
    assert "input must be a non-empty string" in str(no_input.error)
    assert isinstance(anthropic.error, BadRequestError)
    assert "url /v1/embeddings is not served by Anthropic" in str(anthropic.error)
    assert emu.stats()["providers"]["alpha"]["admitted"] == 0
    assert emu.stats()["providers"]["gamma"]["admitted"] == 0


async def test_a_response_cut_at_max_output_tokens_is_an_answer(emulator: Start) -> None:
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    long = "Summarize: " + " ".join(f"word{i}" for i in range(40))
    async with Gateway(cfg) as gw:
        result = await gw.arun({"url": "/v1/responses", "model": "m", "input": long, "max_output_tokens": 4})
    assert result.ok, result.error
    assert result.body is not None
    assert result.body["status"] == "incomplete"
    assert result.body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert result.usage is not None
    assert 0 < result.usage.completion_tokens <= 4


async def test_token_array_inputs_reserve_their_real_token_count(emulator: Start) -> None:
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    one = {"url": "/v1/embeddings", "model": "m", "input": list(range(300))}
    many = {"url": "/v1/embeddings", "model": "m", "input": [[7] * 120, [8, 9] * 40, [1]]}
    async with Gateway(cfg) as gw:
        reserved = [gw.estimate(one).prompt_tokens, gw.estimate(many).prompt_tokens]
        results = await gw.abatch([one, many])
    assert all(r.ok for r in results), [r.error for r in results]
    billed = [r.usage.prompt_tokens for r in results if r.usage is not None]
    assert billed == [300, 201]  # one token an id, as the provider counts them
    assert all(r >= b for r, b in zip(reserved, billed, strict=True)), (reserved, billed)


async def test_responses_and_chat_to_anthropic_answer_in_their_own_shapes(emulator: Start) -> None:
    providers = [emu_provider("gamma", "anthropic")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "a", "targets": ["gamma:claude-x"]}])
    schema = {"type": "object", "properties": {"label": {"type": "string"}}}
    responses = {
        "url": "/v1/responses",
        "model": "a",
        "instructions": "Answer with one word.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": SENTIMENT}]}],
        "max_output_tokens": 10,
        "text": {"format": {"type": "json_schema", "name": "label", "schema": schema}},
    }
    async with Gateway(cfg) as gw:
        responded, chatted = await gw.abatch([responses, chat(SENTIMENT, model="a")])
        refused = await gw.arun({**responses, "tools": [{"type": "web_search"}]})
    assert responded.ok, responded.error
    assert chatted.ok, chatted.error
    assert responded.body is not None
    assert chatted.body is not None
    parsed = Response.model_validate(responded.body)  # the official SDK's own type
    assert (parsed.object, parsed.status, parsed.output_text) == ("response", "completed", "positive")
    assert parsed.usage is not None
    assert responded.usage is not None
    assert parsed.usage.input_tokens == responded.usage.prompt_tokens > 0
    assert parsed.usage.output_tokens == responded.usage.completion_tokens > 0
    assert ChatCompletion.model_validate(chatted.body).choices[0].message.content == "positive"
    assert isinstance(refused.error, BadRequestError)
    assert "field 'tools' has no Messages equivalent" in str(refused.error)
    assert emu.stats()["providers"]["gamma"]["admitted"] == 2  # the refused one was never sent
