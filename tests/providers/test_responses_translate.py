"""OpenAI Responses ⇄ Anthropic Messages (issue 29): what translates (instructions, limits, text
and image parts, JSON-schema output), what is refused naming its field, and the answer's shape."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.endpoints import ENDPOINT_KEY
from batchgate.errors import BadRequestError
from batchgate.providers.responses_translate import (
    SCHEMA_TOOL,
    anthropic_to_response,
    responses_problem,
    responses_to_anthropic,
)

SCHEMA = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}


def to_messages(body: dict[str, Any]) -> dict[str, Any]:
    return responses_to_anthropic(
        {ENDPOINT_KEY: "responses", **body}, model="claude-x", default_max_tokens=99
    )


def test_a_string_input_with_instructions_and_a_limit() -> None:
    out = to_messages(
        {
            "model": "m",
            "input": "hi",
            "instructions": "Be brief.",
            "max_output_tokens": 12,
            "temperature": 0.2,
        }
    )
    assert out == {
        "model": "claude-x",
        "max_tokens": 12,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
    }
    assert to_messages({"input": "hi"})["max_tokens"] == 99  # the provider's default


def test_items_with_text_and_image_parts_and_history() -> None:
    out = to_messages(
        {
            "input": [
                {"role": "developer", "content": "Answer in French."},
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is this?"},
                        {"type": "input_image", "image_url": "data:image/png;base64,QUJD", "detail": "low"},
                        {"type": "input_image", "image_url": "https://x.test/cat.png"},
                    ],
                },
                {"role": "assistant", "content": [{"type": "output_text", "text": "Un chat."}]},
                {"role": "user", "content": "Sure?"},
            ]
        }
    )
    assert out["system"] == "Answer in French."
    assert out["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.png"}},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Un chat."}]},
        {"role": "user", "content": "Sure?"},
    ]


def test_a_json_schema_format_becomes_a_forced_tool() -> None:
    fmt = {"type": "json_schema", "name": "label", "schema": SCHEMA, "strict": True, "description": "d"}
    out = to_messages({"input": "hi", "text": {"format": fmt}})
    assert out["tools"] == [{"name": "label", "input_schema": SCHEMA, "description": "d"}]
    assert out["tool_choice"] == {"type": "tool", "name": "label"}
    loose = to_messages({"input": "hi", "text": {"format": {"type": "json_object"}}})
    assert loose["tools"] == [{"name": SCHEMA_TOOL, "input_schema": {"type": "object"}}]
    assert "tools" not in to_messages({"input": "hi", "text": {"format": {"type": "text"}}})


def test_fields_that_ask_for_nothing_messages_would_not_do_are_carried_as_nothing() -> None:
    body = {"input": "hi", "store": True, "truncation": "disabled", "user": "u1", "service_tier": "auto"}
    out = to_messages(body)
    assert out["metadata"] == {"user_id": "u1"}
    assert set(out) == {"model", "max_tokens", "messages", "metadata"}


@pytest.mark.parametrize(
    "extra", [{"metadata": {"k": "v"}}, {"prompt_cache_key": "k"}, {"service_tier": "flex"}]
)
def test_fields_without_a_messages_equivalent_are_refused_not_dropped(extra: dict[str, Any]) -> None:
    assert responses_problem({"input": "hi", **extra}) is not None


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"tools": [{"type": "web_search"}]}, "field 'tools'"),
        ({"reasoning": {"effort": "high"}}, "field 'reasoning'"),
        ({"previous_response_id": "resp_1"}, "field 'previous_response_id'"),
        ({"include": ["file_search_call.results"]}, "field 'include'"),
        ({"stream": True}, "field 'stream'"),
        ({"truncation": "auto"}, "field 'truncation'"),
        ({"text": {"verbosity": "low"}}, "field 'text.verbosity'"),
        (
            {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "array"}}}},
            "text.format.schema",
        ),
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0]",
        ),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}, "file_id"),
        ({"input": [{"role": "assistant", "content": "first"}]}, "first non-system message"),
    ],
)
def test_what_messages_cannot_express_is_refused_naming_it(extra: dict[str, Any], named: str) -> None:
    body = {ENDPOINT_KEY: "responses", "model": "m", "input": "hi", **extra}
    problem = responses_problem(body)
    assert problem is not None
    assert named in problem, problem
    assert problem.startswith("cannot translate to Anthropic Messages")
    with pytest.raises(BadRequestError, match="gamma: cannot translate"):
        responses_to_anthropic(body, model="c", default_max_tokens=9, provider="gamma")


def test_a_translatable_body_has_no_problem() -> None:
    assert responses_problem({"model": "m", "input": "hi", "max_output_tokens": 5}) is None


def message(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-x-2025",
        "content": [{"type": "text", "text": "positive"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 8,
            "output_tokens": 3,
            "cache_read_input_tokens": 4,
            "cache_creation_input_tokens": 2,
        },
    }
    return {**base, **overrides}


def test_an_answer_comes_back_as_a_response() -> None:
    out = anthropic_to_response(message(), model="m", created=1700)
    assert out["object"] == "response"
    assert (out["id"], out["status"], out["created_at"], out["model"]) == (
        "resp_01",
        "completed",
        1700,
        "claude-x-2025",
    )
    assert out["incomplete_details"] is None
    assert out["output"][0]["type"] == "message"
    assert out["output"][0]["content"] == [{"type": "output_text", "text": "positive", "annotations": []}]
    assert out["usage"] == {
        "input_tokens": 14,
        "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 2},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 17,
    }


def test_an_answer_cut_at_max_tokens_is_incomplete_not_an_error() -> None:
    out = anthropic_to_response(message(stop_reason="max_tokens"), model="m", created=0)
    assert out["status"] == "incomplete"
    assert out["incomplete_details"] == {"reason": "max_output_tokens"}


def test_the_forced_schema_tool_answers_as_json_text() -> None:
    block = {"type": "tool_use", "id": "t1", "name": "label", "input": {"label": "positive"}}
    out = anthropic_to_response(message(content=[block], stop_reason="tool_use"), model="m", created=0)
    assert out["status"] == "completed"
    assert out["output"][0]["content"][0]["text"] == '{"label":"positive"}'
