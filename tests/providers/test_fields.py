"""The field × target-kind registry (`providers/fields.py`), docs/fields.md generated from it, and
the translations it stands for: tools, tool calls and results, response_format, reasoning_effort
and top_k carried to Anthropic; Anthropic-shaped params whole to Anthropic and translated (or
refused) elsewhere; answers back with tool calls, finish reasons and cached tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from batchgate.config import config_from_dict
from batchgate.config.provider import KINDS
from batchgate.endpoints import MESSAGES_PARAMS, wire_body
from batchgate.errors import BadRequestError, UnsupportedField
from batchgate.jobs.fits import RouteFit
from batchgate.messages_in import messages_to_chat
from batchgate.messages_in import refusal as messages_refusal
from batchgate.providers import fields
from batchgate.providers.translate import anthropic_to_openai, openai_to_anthropic
from batchgate.providers.translate_tools import RESPONSE_TOOL
from batchgate.request_fields import TASK_METADATA
from batchgate.server.batch_api.anthropic_api import message_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "fields.md"
USER = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "get", "description": "d", "parameters": {"type": "object"}}}


def to_anthropic(body: dict[str, Any], default_max_tokens: int = 512) -> dict[str, Any]:
    return openai_to_anthropic(body, model="claude-x", default_max_tokens=default_max_tokens)


def test_docs_fields_md_is_the_generated_table() -> None:
    assert DOC.read_text(encoding="utf-8") == fields.table(), "run: python -m batchgate.providers.fields"


def test_every_provider_kind_has_a_registry_entry() -> None:
    assert set(KINDS) <= set(fields.REGISTRY)


def test_carried_and_refused_never_overlap() -> None:
    for kind, (carried, refused) in fields.REGISTRY.items():
        assert not carried & set(refused), kind


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"seed": 3}, "seed"),
        ({"logprobs": True}, "logprobs"),
        ({"n": 2}, "n"),
        ({"metadata": {"k": "v"}}, "metadata"),
        ({"made_up": 1}, "made_up"),
        ({"tools": [{"type": "function", "function": {"name": "f", "strict": True}}]}, "tools"),
        ({"messages": [{"role": "user", "content": "x", "name": "bob"}]}, "messages[0].name"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}, "tools": [TOOL]},
            "response_format",
        ),
    ],
)
def test_a_field_anthropic_cannot_carry_is_refused_by_name(body: dict[str, Any], field: str) -> None:
    found = fields.refusal({"model": "m", "messages": USER, **body}, "anthropic")
    assert isinstance(found, UnsupportedField)
    assert (found.field, found.target_kind) == (field, "anthropic")
    assert fields.refusal({"model": "m", "messages": USER, **body}, "openai") is None  # sent as given


def test_batchgates_own_fields_are_never_refused() -> None:
    body = {"model": "m", "messages": USER, "custom_id": "a", TASK_METADATA: {"k": 1}}
    assert all(fields.refusal(body, kind) is None for kind in fields.REGISTRY)


def test_neutral_values_are_carried() -> None:
    body = {"model": "m", "messages": USER, "n": 1, "logprobs": False, "store": False, "stream": False}
    body |= {"frequency_penalty": 0.0, "presence_penalty": 0}
    assert fields.refusal(body, "anthropic") is None
    assert set(to_anthropic(body)) == {"model", "max_tokens", "messages"}


def test_tools_choice_and_parallel_calls_become_messages_tools() -> None:
    out = to_anthropic(
        {"messages": USER, "tools": [TOOL], "tool_choice": "required", "parallel_tool_calls": False}
    )
    assert out["tools"] == [{"name": "get", "description": "d", "input_schema": {"type": "object"}}]
    assert out["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    named = to_anthropic(
        {"messages": USER, "tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get"}}}
    )
    assert named["tool_choice"] == {"type": "tool", "name": "get"}


def test_tool_calls_and_tool_results_become_blocks() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"q": 1}'}}
    out = to_anthropic(
        {
            "messages": [
                *USER,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
                {"role": "user", "content": "thanks"},
            ],
            "tools": [TOOL],
        }
    )
    assert out["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c1", "name": "get", "input": {"q": 1}}],
    }
    assert out["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "42"},
            {"type": "text", "text": "thanks"},
        ],
    }


def test_response_format_is_a_forced_tool_and_its_answer_the_content() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    out = to_anthropic(
        {
            "messages": USER,
            "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
        }
    )
    assert out["tools"] == [{"name": RESPONSE_TOOL, "input_schema": schema}]
    assert out["tool_choice"] == {"type": "tool", "name": RESPONSE_TOOL}
    answer = {
        "id": "msg_1",
        "content": [{"type": "tool_use", "id": "t", "name": RESPONSE_TOOL, "input": {"a": "x"}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 3, "cache_read_input_tokens": 2},
    }
    chat = anthropic_to_openai(answer, model="m", created=0)
    choice = chat["choices"][0]
    assert orjson.loads(choice["message"]["content"]) == {"a": "x"}
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
    assert chat["usage"]["prompt_tokens_details"]["cached_tokens"] == 2


def test_reasoning_effort_becomes_a_thinking_budget_under_max_tokens() -> None:
    assert to_anthropic({"messages": USER, "reasoning_effort": "medium", "max_tokens": 20000})[
        "thinking"
    ] == {
        "type": "enabled",
        "budget_tokens": 8192,
    }
    assert (
        to_anthropic({"messages": USER, "reasoning_effort": "high", "max_tokens": 5000})["thinking"][
            "budget_tokens"
        ]
        == 4999
    )
    assert "thinking" not in to_anthropic({"messages": USER, "reasoning_effort": "none"})
    with pytest.raises(BadRequestError, match="reasoning_effort"):
        to_anthropic({"messages": USER, "reasoning_effort": "low", "max_tokens": 500})


def test_top_k_is_carried_to_anthropic() -> None:
    assert to_anthropic({"messages": USER, "top_k": 5})["top_k"] == 5


ANTHROPIC_PARAMS: dict[str, Any] = {
    "model": "claude",
    "max_tokens": 64,
    "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}],
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "top_k": 5,
    "tools": [{"name": "get", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
}


def test_anthropic_params_go_whole_to_an_anthropic_target() -> None:
    body = {**messages_to_chat(ANTHROPIC_PARAMS), MESSAGES_PARAMS: ANTHROPIC_PARAMS}
    assert fields.refusal(body, "anthropic") is None
    assert to_anthropic(body) == {**ANTHROPIC_PARAMS, "model": "claude-x"}


def test_anthropic_params_an_openai_target_cannot_carry_are_refused() -> None:
    body = {**messages_to_chat(ANTHROPIC_PARAMS), MESSAGES_PARAMS: ANTHROPIC_PARAMS}
    found = fields.refusal(body, "openai")
    assert found is not None
    assert found.field == "top_k"
    assert wire_body(body)[1].get(MESSAGES_PARAMS) is None  # never sent as a field


def test_anthropic_tools_thinking_and_tool_blocks_translate_to_openai() -> None:
    params = {
        "model": "claude",
        "max_tokens": 64,
        "metadata": {"user_id": "u"},
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "t"},
                    {"type": "tool_use", "id": "c", "name": "get", "input": {"q": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c", "content": "42"},
                    {"type": "text", "text": "ok"},
                ],
            },
        ],
        "tools": [{"name": "get", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 10000},
    }
    assert messages_refusal(params, "openai") is None
    body = messages_to_chat(params)
    assert body["user"] == "u"
    assert body["tools"] == [
        {"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}
    ]
    assert (body["tool_choice"], body["parallel_tool_calls"], body["reasoning_effort"]) == (
        "required",
        False,
        "medium",
    )
    assert body["messages"][1]["tool_calls"][0]["function"] == {"name": "get", "arguments": '{"q":1}'}
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "c", "content": "42"}
    assert body["messages"][3] == {"role": "user", "content": "ok"}


def test_validation_names_line_field_and_target(tmp_path: Path) -> None:
    config = config_from_dict(
        {
            "providers": [{"name": "oai", "kind": "openai", "base_url": "http://127.0.0.1:9"},
                          {"name": "claude", "kind": "anthropic", "base_url": "http://127.0.0.1:9"}],
            "routes": [{"model": "m", "targets": ["oai", "claude"]}],
        }
    )  # fmt: skip
    problem = RouteFit(config).problem({"model": "m", "messages": USER, "seed": 1})
    assert problem is not None
    assert "'seed'" in problem
    assert "target 'claude'" in problem
    assert RouteFit(config).problem({"model": "m", "messages": USER, "temperature": 1}) is None


def test_the_proxys_anthropic_answer_carries_tool_calls_and_cache_reads() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"q": 1}'}}
    chat = {
        "id": "x",
        "model": "m",
        "choices": [
            {
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}},
    }
    message = message_of(chat, "cid")
    assert message["content"] == [{"type": "tool_use", "id": "c1", "name": "get", "input": {"q": 1}}]
    assert message["stop_reason"] == "tool_use"
    assert message["usage"] == {"input_tokens": 6, "output_tokens": 2, "cache_read_input_tokens": 4}
