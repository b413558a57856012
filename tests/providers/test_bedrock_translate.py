"""OpenAI chat ⇄ Bedrock Converse (pure): every field carried or refused by name, never dropped;
the answer (text, tool calls, reasoning, stop reasons, usage with cache) back in OpenAI's shape;
a ConverseStream body put together as the Converse answer it tells."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.emulator.event_stream import converse_stream, event, exception
from batchgate.endpoints import ENDPOINT_KEY
from batchgate.errors import ConfigError, UnsupportedField
from batchgate.providers.bedrock_answer import converse_to_openai
from batchgate.providers.bedrock_stream import StreamFailure, read_stream
from batchgate.providers.bedrock_translate import CARRIED, REFUSED, openai_to_converse

USER = {"role": "user", "content": "Hello"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
SCHEMA = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
PNG = "iVBORw0KGgo="  # base64 of the PNG signature
# The top-level fields of OpenAI's chat completions request (its API reference, 2026-12).
OPENAI_CHAT_FIELDS = [
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "tools",
    "tool_choice",
    "n",
    "stream",
    "user",
    "metadata",
    "response_format",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "parallel_tool_calls",
    "reasoning_effort",
    "functions",
    "function_call",
    "audio",
    "modalities",
    "prediction",
    "service_tier",
    "store",
    "stream_options",
    "web_search_options",
    "verbosity",
    "prompt_cache_key",
    "safety_identifier",
]


def convert(**fields: Any) -> dict[str, Any]:
    return openai_to_converse({"messages": [USER], **fields}, default_max_tokens=64)


def test_every_openai_chat_field_is_carried_or_refused_with_a_reason() -> None:
    assert set(OPENAI_CHAT_FIELDS) <= CARRIED | set(REFUSED)
    assert not CARRIED & set(REFUSED)
    assert all(reason for reason in REFUSED.values())


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_field_is_named_never_dropped(name: str) -> None:
    with pytest.raises(UnsupportedField) as caught:
        convert(**{name: 1})
    assert caught.value.field == name
    assert caught.value.target_kind == "bedrock"
    assert isinstance(caught.value, ConfigError)


def test_a_field_nobody_knows_is_refused_too() -> None:
    with pytest.raises(UnsupportedField, match="never dropped") as caught:
        convert(brand_new_field=True)
    assert caught.value.field == "brand_new_field"


def test_a_plain_body_becomes_messages_system_and_inference_config() -> None:
    body = {
        "model": "m",
        ENDPOINT_KEY: "chat",
        "messages": [{"role": "system", "content": "Be brief."}, USER],
        "max_completion_tokens": 50,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": "END",
        "top_k": 5,
        "user": "u-1",
        "metadata": {"team": "a"},
        "n": 1,
        "stream": False,
        "response_format": {"type": "text"},
    }
    out = openai_to_converse(body, default_max_tokens=64)
    assert out == {
        "messages": [{"role": "user", "content": [{"text": "Hello"}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 50, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]},
        "additionalModelRequestFields": {"top_k": 5},
        "requestMetadata": {"team": "a", "user": "u-1"},
    }
    assert convert()["inferenceConfig"] == {"maxTokens": 64}


def test_tools_tool_calls_and_tool_results_are_carried() -> None:
    tool = {
        "type": "function",
        "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
    }
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    messages = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "user", "content": "and?"},
    ]
    out = openai_to_converse(
        {
            "messages": messages,
            "tools": [tool],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
        },
        default_max_tokens=8,
    )
    assert out["toolConfig"] == {
        "tools": [
            {"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}, "description": "d"}}
        ],
        "toolChoice": {"tool": {"name": "f"}},
    }
    assert out["messages"][1] == {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "c1", "name": "f", "input": {"x": 1}}}],
    }
    # the tool's result and the next user turn are one user message: Converse alternates roles
    assert out["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "c1", "content": [{"text": "42"}]}},
        {"text": "and?"},
    ]
    assert convert(tools=[tool], tool_choice="required")["toolConfig"]["toolChoice"] == {"any": {}}
    with pytest.raises(UnsupportedField, match="no Converse equivalent"):
        convert(tools=[tool], tool_choice="none")


def test_an_echoed_assistant_message_with_empty_extras_is_carried() -> None:
    echoed: dict[str, Any] = {
        "role": "assistant",
        "content": "Hi",
        "refusal": None,
        "annotations": [],
        "audio": None,
    }
    out = convert(messages=[USER, echoed, {"role": "user", "content": "Again"}])
    assert out["messages"][1] == {"role": "assistant", "content": [{"text": "Hi"}]}


def test_a_json_format_is_a_forced_tool_whose_input_is_the_answer() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": True}}
    out = convert(response_format=fmt)
    spec = {
        "name": "verdict",
        "description": "Give the answer as this tool's input.",
        "inputSchema": {"json": SCHEMA},
    }
    assert out["toolConfig"] == {"tools": [{"toolSpec": spec}], "toolChoice": {"tool": {"name": "verdict"}}}
    plain = convert(response_format={"type": "json_object"})["toolConfig"]
    assert plain["toolChoice"] == {"tool": {"name": "structured_output"}}
    assert plain["tools"][0]["toolSpec"]["inputSchema"] == {"json": {"type": "object"}}
    use = {"toolUse": {"toolUseId": "t", "name": "verdict", "input": {"label": "positive"}}}
    answer = {
        "output": {"message": {"role": "assistant", "content": [use]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 3, "outputTokens": 4},
    }
    body = converse_to_openai(answer, model="m", created=0, rid="r", output_tool="verdict")
    assert body["choices"][0]["message"] == {"role": "assistant", "content": '{"label":"positive"}'}
    assert body["choices"][0]["finish_reason"] == "stop"


def test_images_and_cache_points() -> None:
    parts = [
        {"type": "text", "text": "What is it?", "cache_control": {"type": "ephemeral"}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]
    out = convert(messages=[{"role": "user", "content": parts}])
    assert out["messages"][0]["content"] == [
        {"text": "What is it?"},
        {"cachePoint": {"type": "default"}},
        {"image": {"format": "png", "source": {"bytes": PNG}}},
    ]
    low = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}}
    with pytest.raises(UnsupportedField, match="detail"):
        convert(messages=[{"role": "user", "content": [low]}])
    with pytest.raises(UnsupportedField, match="image bytes only"):
        convert(
            messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}
            ]
        )


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"n": 2}, "n"),
        ({"stream": True}, "stream"),
        ({"response_format": {"type": "grammar"}}, "response_format"),
        ({"response_format": {"type": "json_object"}, "tools": [TOOL]}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages[0]"),
        ({"messages": [{"role": "function", "content": "hi"}]}, "messages[0].role"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stop": 3}, "stop"),
        ({"metadata": {"a": 1}}, "metadata"),
        ({"messages": [{"role": "user", "content": "hi", "name": "ann"}]}, "messages[0].name"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "strict": True}}]},
            "tools[0].function.strict",
        ),
    ],
)
def test_a_value_converse_cannot_express_is_refused_by_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(UnsupportedField) as caught:
        convert(**fields)
    assert caught.value.field == named


ANSWER: dict[str, Any] = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "thinking", "signature": "s"}}},
                {"text": "Sure."},
                {"toolUse": {"toolUseId": "t1", "name": "f", "input": {"x": 1}}},
            ],
        }
    },
    "stopReason": "tool_use",
    "usage": {
        "inputTokens": 10,
        "outputTokens": 5,
        "totalTokens": 15,
        "cacheReadInputTokens": 100,
        "cacheWriteInputTokens": 7,
    },
}


def test_an_answer_comes_back_as_a_chat_completion() -> None:
    body = converse_to_openai(ANSWER, model="m", created=7, rid="r1")
    message = body["choices"][0]["message"]
    assert message["content"] == "Sure."
    assert message["reasoning_content"] == "thinking"
    assert message["tool_calls"] == [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    ]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["usage"] == {
        "prompt_tokens": 117,
        "completion_tokens": 5,
        "total_tokens": 122,
        "prompt_tokens_details": {"cached_tokens": 100},
    }


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("guardrail_intervened", "content_filter"),
    ],
)
def test_stop_reasons_map_to_finish_reasons(stop: str, finish: str) -> None:
    body = converse_to_openai({**ANSWER, "stopReason": stop}, model="m", created=0, rid="")
    assert body["choices"][0]["finish_reason"] == finish


@pytest.mark.parametrize(
    "broken", [{"output": {}}, {**ANSWER, "usage": {"inputTokens": -1, "outputTokens": 1}}]
)
def test_a_body_that_is_no_converse_answer_is_a_value_error(broken: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"content|usage"):
        converse_to_openai(broken, model="m", created=0, rid="")


def test_a_stream_is_put_together_as_the_answer_it_tells() -> None:
    answer = {
        **ANSWER,
        "output": {"message": {"role": "assistant", "content": ANSWER["output"]["message"]["content"][1:]}},
    }
    answer["metrics"] = {"latencyMs": 3}
    assert read_stream(converse_stream(answer)) == answer


def test_an_exception_in_a_stream_is_named() -> None:
    with pytest.raises(StreamFailure) as caught:
        read_stream(exception("throttlingException", "Too many tokens"))
    assert caught.value.error_type == "throttlingException"


def test_a_stream_broken_off_is_a_value_error() -> None:
    whole = converse_stream(
        {**ANSWER, "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}}}
    )
    with pytest.raises(ValueError, match=r"ended|event stream"):
        read_stream(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match="event stream"):
        read_stream(orjson.dumps({"not": "a stream"}) * 4)


_KEYS = st.sampled_from(["type", "text", "role", "content", "function", "name", "url", "image_url"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", "auto", "function", "user"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


def _outcome(body: dict[str, Any]) -> dict[str, Any] | UnsupportedField:
    try:
        return openai_to_converse(body, default_max_tokens=8)
    except UnsupportedField as refused:
        return refused


@pytest.mark.slow  # a property run
@settings(max_examples=300)
@given(fields=st.dictionaries(st.sampled_from([*OPENAI_CHAT_FIELDS, "top_k", "mystery"]), JSON, max_size=5))
def test_any_body_is_translated_or_refused_by_one_of_its_fields(fields: dict[str, Any]) -> None:
    """Whatever the values: a Converse body, or an `UnsupportedField` naming a field of the body
    (never another exception, never a field dropped: a refused field passes only as null)."""
    body = {"messages": [USER], **fields}
    out = _outcome(body)
    if isinstance(out, UnsupportedField):
        assert out.field.split(".")[0].split("[")[0] in body
        return
    assert {name for name, value in body.items() if value is not None} <= CARRIED
    assert out["messages"]
    assert out["inferenceConfig"]["maxTokens"] >= 1


@pytest.mark.parametrize(
    "garbled",
    [
        event("contentBlockDelta", {"delta": {"text": 5}}),
        event("contentBlockStart", {"start": {"toolUse": {"toolUseId": "t", "name": "f"}}})
        + event("contentBlockDelta", {"delta": {"toolUse": {"input": "{bad"}}}),
        event("metadata", []),  # type: ignore[arg-type]
    ],
    ids=["text-not-a-string", "tool-input-not-json", "payload-not-an-object"],
)
def test_garbled_events_are_a_value_error(garbled: bytes) -> None:
    with pytest.raises(ValueError, match="not an event stream"):
        read_stream(garbled)
