"""OpenAI ⇄ Anthropic translation: system prompts, alternation, parts, limits and usage."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.errors import BadRequestError
from batchgate.providers.translate import anthropic_to_openai, openai_to_anthropic


def to_anthropic(body: dict[str, Any], default_max_tokens: int = 512) -> dict[str, Any]:
    return openai_to_anthropic(body, model="claude-x", default_max_tokens=default_max_tokens)


def test_minimal_request_gets_model_and_default_max_tokens() -> None:
    out = to_anthropic({"model": "ignored", "messages": [{"role": "user", "content": "hi"}]}, 777)
    assert out == {"model": "claude-x", "max_tokens": 777, "messages": [{"role": "user", "content": "hi"}]}


def test_system_and_developer_messages_move_to_top_level_joined() -> None:
    out = to_anthropic(
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": [{"type": "text", "text": "Use French."}]},
                {"role": "user", "content": "hi"},
                {"role": "system", "content": "Late rule."},
            ]
        }
    )
    assert out["system"] == "Be brief.\n\nUse French.\n\nLate rule."
    assert out["messages"] == [{"role": "user", "content": "hi"}]


def test_consecutive_same_role_messages_are_merged_into_blocks() -> None:
    out = to_anthropic(
        {
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "user", "content": [{"type": "text", "text": "b"}]},
                {"role": "assistant", "content": "c"},
                {"role": "assistant", "content": "d"},
                {"role": "user", "content": "e"},
            ]
        }
    )
    assert out["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "c"}, {"type": "text", "text": "d"}]},
        {"role": "user", "content": "e"},
    ]


def test_merge_does_not_mutate_the_input() -> None:
    body: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": "b"},
        ]
    }
    to_anthropic(body)
    assert body["messages"][0]["content"] == [{"type": "text", "text": "a"}]


def test_first_message_from_assistant_is_refused() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": "y"},
        ]
    }
    with pytest.raises(BadRequestError, match="first non-system message"):
        openai_to_anthropic(body, model="m", default_max_tokens=1, provider="gamma")


def test_refusal_names_the_provider() -> None:
    with pytest.raises(BadRequestError) as info:
        openai_to_anthropic({"messages": []}, model="m", default_max_tokens=1, provider="gamma")
    assert info.value.provider == "gamma"
    assert info.value.message.startswith("gamma: ")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"messages": "hi"}, "non-empty list"),
        ({"messages": [{"role": "system", "content": "only system"}]}, "no user message"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "field 'n'"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": True}, "field 'stream'"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "custom"}]}, "field 'tools'"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
        ({"messages": [{"role": "function", "content": "x"}]}, "role 'function'"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "'input_audio'"),
        ({"messages": [{"role": "user", "content": None}]}, "content must be"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": True}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": 5}, "'stop'"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": ["a", 1]}, "'stop'"),
        ({"messages": ["not an object"]}, r"messages\[0\]"),
    ],
)
def test_untranslatable_requests_are_refused_clearly(body: dict[str, Any], reason: str) -> None:
    with pytest.raises(BadRequestError, match=reason):
        to_anthropic(body)


def test_n_of_one_is_accepted_and_a_seed_refused() -> None:
    out = to_anthropic({"messages": [{"role": "user", "content": "x"}], "n": 1})
    assert "n" not in out
    with pytest.raises(BadRequestError, match="field 'seed'"):
        to_anthropic({"messages": [{"role": "user", "content": "x"}], "seed": 3})


def test_content_parts_become_text_and_image_blocks() -> None:
    out = to_anthropic(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                    ],
                }
            ]
        }
    )
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"max_tokens": 50}, 50),
        ({"max_completion_tokens": 60}, 60),
        ({"max_tokens": 50, "max_completion_tokens": 70}, 70),
        ({}, 512),
    ],
)
def test_max_tokens_sources(extra: dict[str, Any], expected: int) -> None:
    out = to_anthropic({"messages": [{"role": "user", "content": "x"}], **extra})
    assert out["max_tokens"] == expected


def test_sampling_stop_and_user_fields() -> None:
    base: dict[str, Any] = {"messages": [{"role": "user", "content": "x"}]}
    out = to_anthropic({**base, "temperature": 0.2, "top_p": 0.9, "stop": "END", "user": "u-1"})
    assert out["temperature"] == 0.2
    assert out["top_p"] == 0.9
    assert out["stop_sequences"] == ["END"]
    assert out["metadata"] == {"user_id": "u-1"}
    assert to_anthropic({**base, "stop": ["a", "b"]})["stop_sequences"] == ["a", "b"]
    assert "stop_sequences" not in to_anthropic({**base, "stop": None})
    assert "stop_sequences" not in to_anthropic({**base, "stop": []})


def message(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x-20250101",
        "content": [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    base.update(overrides)
    return base


def test_response_becomes_chat_completion() -> None:
    out = anthropic_to_openai(message(), model="claude-x", created=1234)
    assert out == {
        "id": "msg_1",
        "object": "chat.completion",
        "created": 1234,
        "model": "claude-x-20250101",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello, world"},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        (None, None),
    ],
)
def test_finish_reasons(stop_reason: str | None, finish: str | None) -> None:
    out = anthropic_to_openai(message(stop_reason=stop_reason), model="m", created=0)
    assert out["choices"][0]["finish_reason"] == finish


def test_usage_counts_cache_reads_and_writes_as_prompt() -> None:
    usage = {
        "input_tokens": 10,
        "output_tokens": 4,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 7,
    }
    out = anthropic_to_openai(message(usage=usage), model="m", created=0)
    assert out["usage"] == {
        "prompt_tokens": 117,
        "completion_tokens": 4,
        "total_tokens": 121,
        "prompt_tokens_details": {"cached_tokens": 100},
    }


def test_missing_response_model_falls_back_to_requested() -> None:
    assert anthropic_to_openai(message(model=None), model="asked", created=0)["model"] == "asked"


def test_tool_use_blocks_become_tool_calls() -> None:
    content = [{"type": "tool_use", "id": "tu_1", "name": "get", "input": {"city": "Oslo"}}]
    out = anthropic_to_openai(message(content=content, stop_reason="tool_use"), model="m", created=0)
    msg = out["choices"][0]["message"]
    assert msg["content"] is None
    assert msg["tool_calls"] == [
        {"id": "tu_1", "type": "function", "function": {"name": "get", "arguments": '{"city":"Oslo"}'}}
    ]


@pytest.mark.parametrize(
    "bad",
    [
        message(content="text"),
        message(usage=None),
        message(usage={"input_tokens": 1}),
        message(usage={"input_tokens": "1", "output_tokens": 1}),
        message(usage={"input_tokens": 1, "output_tokens": -1}),
        message(content=[{"type": "text"}]),
        message(content=["x"]),
    ],
)
def test_non_messages_responses_raise_value_error(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the client turns any ValueError into MalformedResponse
        anthropic_to_openai(bad, model="m", created=0)
