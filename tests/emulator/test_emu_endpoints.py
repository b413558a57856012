"""The emulator's other OpenAI endpoints (embeddings, Responses, legacy completions), driven by the
official `openai` SDK over a real socket and parsed by the SDK's own types."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest

from batchgate.emulator import Emulator, embedding_vector
from batchgate.tokens import ExactTokenCounter

pytestmark = pytest.mark.integration

SENTIMENT = "Classify the sentiment of this review: I loved it, the acting was wonderful"
LONG = "Summarize: " + " ".join(f"word{i}" for i in range(40))


@pytest.fixture
async def emu(
    make_provider: Callable[..., dict[str, Any]], make_config: Callable[..., Any]
) -> AsyncIterator[Emulator]:
    cfg = make_config(
        make_provider("alpha"),
        make_provider("gamma", "anthropic"),
        make_provider("small", limits={"rpm": 600, "tpm": 1000}),
        make_provider("chars", charge={"chars_per_token": 4}),
    )
    async with Emulator(cfg) as emulator:
        yield emulator


def oa(emu: Emulator, name: str = "alpha") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=emu.base_url(name), api_key="x", max_retries=0)


def count(text: str) -> int:
    return ExactTokenCounter().count_text(text)


async def test_embeddings_are_the_deterministic_vectors_of_each_input(emu: Emulator) -> None:
    texts = ["the cat sat", "on the mat", "the cat sat"]
    async with oa(emu) as client:
        floats = await client.embeddings.create(
            model="text-embedding-3-small", input=texts, encoding_format="float"
        )
        packed = await client.embeddings.create(model="text-embedding-3-small", input=texts, dimensions=8)
    assert [d.index for d in floats.data] == [0, 1, 2]
    assert [d.embedding for d in floats.data] == [embedding_vector(t, 1536) for t in texts]
    assert floats.data[0].embedding == floats.data[2].embedding != floats.data[1].embedding
    assert sum(x * x for x in floats.data[1].embedding) == pytest.approx(1.0, abs=1e-5)
    # the SDK asks for base64 by default and decodes it: the same float32 values
    assert [d.embedding for d in packed.data] == [embedding_vector(t, 8) for t in texts]
    total = sum(count(t) for t in texts)
    assert floats.usage.prompt_tokens == floats.usage.total_tokens == total
    assert floats.object == "list"
    assert floats.model == "text-embedding-3-small"


async def test_embeddings_are_charged_input_tokens_only(emu: Emulator) -> None:
    text = "a short text to embed"
    async with oa(emu, "small") as client:
        await client.embeddings.create(model="e", input=text)
    # a chat request would also be charged default_max_tokens of output
    charged = emu.stats()["providers"]["small"]["tokens_charged"]
    assert charged == {"input": count(text), "output": 0, "total": count(text)}


async def test_embeddings_refuse_what_openai_refuses(emu: Emulator) -> None:
    async with oa(emu) as client:
        with pytest.raises(openai.BadRequestError) as too_many:
            await client.embeddings.create(model="e", input=["x"] * 2049)
        with pytest.raises(openai.BadRequestError) as empty:
            await client.embeddings.create(model="e", input=[])
        tokens = await client.embeddings.create(model="e", input=[[1, 2, 3]], encoding_format="float")
    assert too_many.value.code == "array_above_max_length"
    assert empty.value.param == "input"
    assert tokens.usage.prompt_tokens == 3


async def test_responses_answer_in_the_response_shape(emu: Emulator) -> None:
    async with oa(emu) as client:
        response = await client.responses.create(
            model="gpt-x", input=SENTIMENT, instructions="Be brief.", max_output_tokens=20
        )
    assert response.object == "response"
    assert response.status == "completed"
    assert response.output_text == "positive"
    assert response.incomplete_details is None
    usage = response.usage
    assert usage is not None
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": SENTIMENT}]
    assert usage.input_tokens == ExactTokenCounter().count_prompt({"messages": messages})
    assert usage.output_tokens == 1
    assert usage.output_tokens_details.reasoning_tokens == 0
    assert usage.total_tokens == usage.input_tokens + 1


async def test_a_response_cut_at_max_output_tokens_is_incomplete_not_an_error(emu: Emulator) -> None:
    items: Any = [{"role": "user", "content": [{"type": "input_text", "text": LONG}]}]
    async with oa(emu) as client:
        response = await client.responses.create(model="gpt-x", input=items, max_output_tokens=5)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None
    assert 0 < response.usage.output_tokens <= 5
    assert response.output_text == " ".join(response.output_text.split()) != ""


async def test_responses_charge_max_output_tokens(emu: Emulator) -> None:
    async with oa(emu, "small") as client:
        await client.responses.create(model="m", input="hi", max_output_tokens=300)
    prompt = ExactTokenCounter().count_prompt({"messages": [{"role": "user", "content": "hi"}]})
    charged = emu.stats()["providers"]["small"]["tokens_charged"]
    assert charged == {"input": prompt, "output": 300, "total": prompt + 300}


async def test_legacy_completions_answer_each_prompt(emu: Emulator) -> None:
    async with oa(emu) as client:
        one = await client.completions.create(model="gpt-3.5-turbo-instruct", prompt=SENTIMENT, max_tokens=10)
        two = await client.completions.create(model="m", prompt=[SENTIMENT, "hello there"], max_tokens=10)
        with pytest.raises(openai.BadRequestError) as missing:
            await client.completions.create(model="m", prompt=None, max_tokens=10)
    assert one.object == "text_completion"
    assert one.choices[0].text == "positive"
    assert one.choices[0].finish_reason == "stop"
    assert one.usage is not None
    assert one.usage.prompt_tokens == count(SENTIMENT)
    assert [c.text for c in two.choices] == ["positive", "echo: hello there"]
    assert [c.index for c in two.choices] == [0, 1]
    assert missing.value.param == "prompt"


async def test_an_anthropic_provider_has_no_embeddings(emu: Emulator) -> None:
    async with openai.AsyncOpenAI(base_url=f"{emu.url}/gamma/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError):
            await client.embeddings.create(model="e", input="x")


async def test_a_provider_charging_characters_counts_each_endpoint_s_text(emu: Emulator) -> None:
    async with oa(emu, "chars") as client:
        await client.embeddings.create(model="e", input=["a" * 40, "b" * 20])
        await client.responses.create(model="m", input="c" * 12, instructions="d" * 8, max_output_tokens=7)
        await client.completions.create(model="m", prompt="e" * 16, max_tokens=3)
    charged = emu.stats()["providers"]["chars"]["tokens_charged"]
    assert charged["input"] == 60 // 4 + 20 // 4 + 16 // 4
    assert charged["output"] == 7 + 3
