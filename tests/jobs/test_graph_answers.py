"""What a fan-out or pipeline reads from a stored answer: the text of every text endpoint's shape,
and an embeddings answer's vectors in input order (issue 29: the joined line kept only text)."""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.jobs.graph.expand import answer_of, vectors_of


def stored(body: dict[str, Any]) -> bytes:
    return orjson.dumps({"custom_id": "x", "response": {"status_code": 200, "body": body}, "error": None})


def test_the_answer_text_of_each_text_endpoint() -> None:
    chat = {"object": "chat.completion", "choices": [{"message": {"content": "yes"}}]}
    response = {
        "object": "response",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "yes"}]}],
    }
    completion = {"object": "text_completion", "choices": [{"text": "yes"}]}
    assert [answer_of(stored(b)) for b in (chat, response, completion)] == ["yes"] * 3
    assert answer_of(None) is None
    assert answer_of(b"not json") is None


def test_an_embeddings_answer_gives_its_vectors_in_input_order_and_no_text() -> None:
    body = {
        "object": "list",
        "data": [{"index": 1, "embedding": [0.5, 0.5]}, {"index": 0, "embedding": "AAAAPw=="}],
        "usage": {"prompt_tokens": 2, "total_tokens": 2},
    }
    assert vectors_of(stored(body)) == ["AAAAPw==", [0.5, 0.5]]
    assert answer_of(stored(body)) is None
    assert vectors_of(stored({"object": "chat.completion", "choices": []})) is None
