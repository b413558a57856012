"""What each OpenAI endpoint's body may hold and reserves (`batchgate.endpoints`, `models`,
`tokens`): the checks `run` and the Gateway make before sending, per endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.endpoints import ENDPOINT_KEY, request_problem, wire_body, with_endpoint
from batchgate.models import answer_text, requested_output_tokens
from batchgate.tokens import iter_prompt_text


def _body(url: str, **fields: Any) -> dict[str, Any]:
    return with_endpoint({"url": url, "model": "m", **fields})


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (_body("/v1/embeddings", input="x"), None),
        (_body("/v1/embeddings", input=[[1, 2], "y"]), None),
        (_body("/v1/embeddings", input=[1, 2, 3]), None),
        (_body("/v1/embeddings", input=["x"] * 2048), None),
        (_body("/v1/embeddings", input=["x"] * 2049), "input holds 2049 items; at most 2048"),
        (_body("/v1/embeddings", input=""), "input must be a non-empty string"),
        (_body("/v1/embeddings"), "input must be a non-empty string, an array of strings or token arrays"),
        (_body("/v1/embeddings", input=["x", {}]), "input[1] must be a non-empty string or token array"),
        (
            _body("/v1/embeddings", input="x", encoding_format="int8"),
            "encoding_format must be float or base64",
        ),
        (_body("/v1/embeddings", input="x", dimensions=0), "dimensions must be an integer >= 1"),
        (_body("/v1/responses", input="x", max_output_tokens=5), None),
        (_body("/v1/responses", input=[{"role": "user", "content": "x"}]), None),
        (_body("/v1/responses", input=["x"]), "input must be a non-empty string or list of items"),
        (_body("/v1/responses", input="x", instructions=3), "instructions must be a string"),
        (_body("/v1/responses", input="x", max_output_tokens="5"), "max_output_tokens must be an integer"),
        (_body("/v1/responses", messages=[]), "messages is a chat field; /v1/responses does not take it"),
        (_body("/v1/completions", prompt=["a", "b"]), None),
        (_body("/v1/completions", prompt=[1]), "prompt must be a non-empty string or array of strings"),
        (_body("/v1/completions", prompt="a", temperature=9), "temperature must be a number from 0 to 2"),
        (_body("/v1/moderations", input="x"), "url must be one of /v1/chat/completions"),
        (_body("/v1/chat/completions", messages=[{"role": "user", "content": "x"}]), None),
    ],
)
def test_each_endpoint_checks_its_own_fields(body: dict[str, Any], problem: str | None) -> None:
    found = request_problem(body)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def test_the_endpoint_goes_with_the_body_but_never_on_the_wire() -> None:
    body = _body("/v1/embeddings", input="x")
    assert body[ENDPOINT_KEY] == "embeddings"
    assert "url" not in body
    assert wire_body(body) == ("embeddings", {"model": "m", "input": "x"})
    chat = _body("/v1/chat/completions", messages=[])
    assert wire_body(chat) == ("chat/completions", {"model": "m", "messages": []})


def test_what_each_endpoint_reserves_for_output() -> None:
    assert requested_output_tokens(_body("/v1/embeddings", input="x", max_tokens=50), 1024) == 0
    assert requested_output_tokens(_body("/v1/responses", input="x", max_output_tokens=40), 1024) == 40
    assert requested_output_tokens(_body("/v1/responses", input="x"), 1024) == 1024
    assert requested_output_tokens(_body("/v1/completions", prompt=["a", "b"], max_tokens=7, n=2), 9) == 28


def test_prompt_text_of_every_endpoint_is_counted() -> None:
    responses = _body("/v1/responses", instructions="be brief", input=[{"role": "user", "content": "hi"}])
    assert sorted(iter_prompt_text(responses)) == ["be brief", "hi"]
    assert list(iter_prompt_text(_body("/v1/embeddings", input=["a", "b"]))) == ["a", "b"]
    assert list(iter_prompt_text(_body("/v1/completions", prompt="p"))) == ["p"]


def test_the_answer_text_of_each_shape() -> None:
    response = {
        "object": "response",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "yes"}]}],
    }
    assert answer_text(response) == "yes"
    assert answer_text({"object": "text_completion", "choices": [{"text": "t"}]}) == "t"
    assert answer_text({"object": "list", "data": []}) is None
