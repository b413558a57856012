"""Every OpenAI endpoint through `batchgate serve`, as the official `openai` SDK calls it: the live
proxy at `/v1/embeddings`, `/v1/responses` and `/v1/completions` (`embeddings.create`,
`responses.create`, `completions.create`), and `files.create` + `batches.create` for each of the
four endpoints, answers parsed by the SDK's own types; a batch names one endpoint (PROTOCOLS.md),
and a body never picks its endpoint by batchgate's own key (bodies are data: issue 27)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai.types import Completion, CreateEmbeddingResponse
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from batchgate.emulator import embedding_vector
from batchgate.endpoints import ENDPOINT_KEY
from batchgate.tokens import ExactTokenCounter

from .harness import ALPHA, GAMMA, Server, client, lines_of, upload, wait_ended
from .jobs_client import JobsClient

pytestmark = pytest.mark.integration

TEXTS = ("the cat sat", "on the mat", "a quiet river")
REVIEW = "Classify the sentiment of this review: awful, broken on day one"
BODIES: dict[str, Any] = {
    "/v1/chat/completions": lambda i: {
        "model": ALPHA,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": REVIEW}],
    },
    "/v1/embeddings": lambda i: {"model": ALPHA, "input": [TEXTS[i], TEXTS[(i + 1) % 3]], "dimensions": 8},
    "/v1/responses": lambda i: {
        "model": ALPHA,
        "instructions": "Be brief.",
        "input": REVIEW,
        "max_output_tokens": 9,
    },
    "/v1/completions": lambda i: {"model": ALPHA, "prompt": REVIEW, "max_tokens": 6},
}
TYPES: dict[str, Any] = {
    "/v1/chat/completions": ChatCompletion,
    "/v1/embeddings": CreateEmbeddingResponse,
    "/v1/responses": Response,
    "/v1/completions": Completion,
}


def _line(url: str, i: int) -> dict[str, Any]:
    return {"custom_id": f"r{i}", "method": "POST", "url": url, "body": BODIES[url](i)}


@pytest.mark.parametrize("url", list(BODIES))
def test_a_batch_on_each_endpoint_answers_in_its_shape(
    server: Server, keys: dict[str, str], url: str
) -> None:
    with client(server, keys["a"]) as c:
        file_id = upload(c, [_line(url, i) for i in range(3)])
        created = c.batches.create(input_file_id=file_id, endpoint=url, completion_window="24h")  # type: ignore[arg-type]
        assert created.endpoint == url
        batch = wait_ended(c, created.id)
        assert (batch.status, batch.endpoint) == ("completed", url), batch
        assert batch.request_counts is not None
        assert (batch.request_counts.completed, batch.request_counts.failed) == (3, 0)
        out = {x["custom_id"]: x for x in lines_of(c, batch.output_file_id)}
    answers = {cid: TYPES[url].model_validate(x["response"]["body"]) for cid, x in out.items()}
    assert sorted(answers) == ["r0", "r1", "r2"]
    usage = batch.usage
    assert usage is not None
    if url == "/v1/embeddings":
        for i in range(3):
            vectors = [d.embedding for d in answers[f"r{i}"].data]
            assert vectors == [embedding_vector(TEXTS[i], 8), embedding_vector(TEXTS[(i + 1) % 3], 8)]
        count = ExactTokenCounter().count_text
        assert usage.input_tokens == 2 * sum(count(t) for t in TEXTS)
        assert usage.output_tokens == 0  # embeddings: input tokens only
    else:
        assert usage.output_tokens > 0
    if url == "/v1/responses":
        assert {a.output_text for a in answers.values()} == {"negative"}
        assert usage.input_tokens == sum(a.usage.input_tokens for a in answers.values())


def test_a_batch_s_lines_must_all_name_its_endpoint(server: Server, keys: dict[str, str]) -> None:
    with client(server, keys["a"]) as c:
        file_id = upload(c, [_line("/v1/embeddings", 0), _line("/v1/responses", 1)])
        batch = wait_ended(
            c, c.batches.create(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h").id
        )
        with pytest.raises(openai.BadRequestError) as refused:
            c.batches.create(input_file_id=file_id, endpoint="/v1/moderations", completion_window="24h")
    assert batch.status == "failed"
    assert batch.errors is not None
    assert batch.errors.data is not None
    assert [(e.line, e.message) for e in batch.errors.data] == [
        (2, "url /v1/responses does not match the batch's endpoint /v1/embeddings")
    ]
    assert refused.value.param == "endpoint"


def test_the_live_proxy_serves_embeddings_responses_and_completions(
    server: Server, keys: dict[str, str]
) -> None:
    with client(server, keys["b"]) as c:
        floats = c.embeddings.create(model=ALPHA, input=list(TEXTS), encoding_format="float", dimensions=8)
        packed = c.embeddings.create(model=ALPHA, input="the cat sat")  # the SDK asks for base64
        raw = c.responses.with_raw_response.create(
            model=ALPHA, input=REVIEW, instructions="Be brief.", max_output_tokens=9
        )
        cut = c.responses.create(model=ALPHA, input="Tell me about " + TEXTS[0], max_output_tokens=2)
        completion = c.completions.create(model=ALPHA, prompt=REVIEW, max_tokens=6)
    assert [d.embedding for d in floats.data] == [embedding_vector(t, 8) for t in TEXTS]
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 0
    assert packed.data[0].embedding == embedding_vector("the cat sat", 1536)
    answer = raw.parse()
    assert (answer.object, answer.status, answer.output_text) == ("response", "completed", "negative")
    assert answer.usage is not None
    assert answer.usage.output_tokens == 1
    assert float(raw.headers["x-batchgate-queue-ms"]) >= 0.0
    assert cut.status == "incomplete"  # an answer, not an error
    assert cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"
    assert (completion.object, completion.choices[0].text) == ("text_completion", "negative")


def test_the_live_endpoints_refuse_what_they_cannot_take(server: Server, keys: dict[str, str]) -> None:
    with client(server, keys["b"]) as c:
        with pytest.raises(openai.BadRequestError) as many:
            c.embeddings.create(model=ALPHA, input=["x"] * 2049)
        with pytest.raises(openai.BadRequestError) as no_input:
            c.post("/responses", body={"model": ALPHA, "instructions": "hi"}, cast_to=object)
        with pytest.raises(openai.BadRequestError) as streamed:
            c.post("/completions", body={"model": ALPHA, "prompt": "hi", "stream": True}, cast_to=object)
        with pytest.raises(openai.BadRequestError):  # Anthropic has no embeddings
            c.embeddings.create(model=GAMMA, input="x")
        with pytest.raises(openai.NotFoundError):
            c.embeddings.create(model="no-such-route", input="x")
    assert "at most 2048" in many.value.message
    assert "input must be" in no_input.value.message
    assert streamed.value.param == "stream"


def test_a_body_cannot_choose_its_endpoint_by_batchgate_s_own_key(
    server: Server, keys: dict[str, str]
) -> None:
    """A chat body carrying the key batchgate keeps a line's endpoint under is still a chat body
    (refused here: it has no messages), never an embeddings request."""
    auth = {"Authorization": f"Bearer {keys['b']}"}
    smuggled = {"model": ALPHA, "input": "x", ENDPOINT_KEY: "embeddings"}
    r = httpx.post(server.base_url + "/chat/completions", json=smuggled, headers=auth)
    assert r.status_code == 400, r.text
    assert "messages" in r.json()["error"]["message"]
    back = {"model": ALPHA, "input": "x", ENDPOINT_KEY: "chat"}  # nor turns embeddings into chat
    r = httpx.post(server.base_url + "/embeddings", json=back, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["object"] == "list"


def test_a_native_job_s_lines_may_mix_endpoints(server: Server, keys: dict[str, str]) -> None:
    jobs = JobsClient(server, keys["b"])
    try:
        lines = [{**_line(url, i % 3), "custom_id": f"r{i}"} for i, url in enumerate(BODIES)]
        made = jobs.create(requests=lines)
        job = jobs.wait_state(made["id"])
        results = {r["custom_id"]: r for r in jobs.results(made["id"])}
    finally:
        jobs.close()
    assert job["state"] == "completed", job
    shapes = {cid: r["response"]["body"]["object"] for cid, r in results.items()}
    assert shapes == {"r0": "chat.completion", "r1": "list", "r2": "response", "r3": "text_completion"}
