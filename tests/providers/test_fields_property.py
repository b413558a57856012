"""Property: a body drawn from the OpenAI chat and Anthropic Messages field sets (and unknown names)
is, for every target kind, either refused (naming a field) or sent with every field it holds
carried — found in what the target is sent, as itself or its translation. Never dropped."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.endpoints import MESSAGES_PARAMS, wire_body
from batchgate.errors import BadRequestError, UnsupportedField
from batchgate.messages_in import CARRIED as MESSAGES_CARRIED
from batchgate.messages_in import REFUSED as MESSAGES_REFUSED
from batchgate.messages_in import messages_to_chat
from batchgate.providers import fields
from batchgate.providers.bedrock_translate import openai_to_converse
from batchgate.providers.gemini_translate import openai_to_gemini
from batchgate.providers.translate import openai_to_anthropic
from batchgate.providers.translate_tools import RESPONSE_TOOL

pytestmark = pytest.mark.slow  # property runs: a few seconds

TOOL = {"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}
SCHEMA = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
OPENAI_VALUES: Mapping[str, list[Any]] = {
    "max_tokens": [64, 4096], "max_completion_tokens": [64, 4096], "temperature": [0, 0.7],
    "top_p": [0.5, 1], "top_k": [5], "stop": ["END", ["a", "b"]], "user": ["u1"],
    "tools": [[TOOL]], "parallel_tool_calls": [True, False],
    "tool_choice": ["auto", "none", "required", {"type": "function", "function": {"name": "get"}}],
    "response_format": [{"type": "text"}, {"type": "json_object"}, SCHEMA],
    "reasoning_effort": ["none", "low", "high"], "n": [1, 2], "seed": [7], "logprobs": [False, True],
    "stream": [False], "store": [False, True], "metadata": [{"k": "v"}], "frequency_penalty": [0, 0.5],
    "presence_penalty": [0, 1], "logit_bias": [{"1": 2}], "top_logprobs": [2],
    "service_tier": ["auto", "flex"],
    "modalities": [["text"], ["text", "audio"]], "verbosity": ["low"], "prompt_cache_key": ["k"],
    "safety_identifier": ["s"], "web_search_options": [{}], "functions": [[{"name": "f"}]],
    "function_call": ["auto"], "audio": [{"voice": "alloy"}], "prediction": [{"type": "content"}],
    "stream_options": [{"include_usage": True}], "prompt_cache_retention": ["24h"],
}  # fmt: skip
ANTHROPIC_VALUES: Mapping[str, list[Any]] = {
    "system": ["S", [{"type": "text", "text": "S"}], [{"type": "text", "text": "S", "cache_control": {}}]],
    "temperature": [0.5], "top_p": [0.9], "top_k": [5], "stop_sequences": [["END"]],
    "metadata": [{"user_id": "u"}, {"user_id": "u", "other": 1}],
    "tools": [[{"name": "get", "input_schema": {"type": "object"}}], [{"type": "web_search", "name": "w"}]],
    "tool_choice": [{"type": "auto"}, {"type": "any"}, {"type": "tool", "name": "get"}, {"type": "none"}],
    "thinking": [{"type": "enabled", "budget_tokens": 2048}, {"type": "disabled"}],
    "service_tier": ["auto"], "container": ["c"], "mcp_servers": [[]], "context_management": [{}],
}  # fmt: skip
# Values an OpenAI-wire target can be sent (so that drawing them reaches the carried check often)
ANTHROPIC_CARRYABLE: Mapping[str, list[Any]] = {
    "system": ["S", [{"type": "text", "text": "S"}]], "temperature": [0.5], "top_p": [0.9],
    "stop_sequences": [["END"]], "metadata": [{"user_id": "u"}],
    "tools": [[{"name": "get", "input_schema": {"type": "object"}}]],
    "tool_choice": [{"type": "auto"}, {"type": "any"}, {"type": "tool", "name": "get"}, {"type": "none"}],
    "thinking": [{"type": "enabled", "budget_tokens": 2048}, {"type": "disabled"}],
}  # fmt: skip
UNKNOWN = st.from_regex(r"[a-z]{3,10}_[a-z]{2,6}", fullmatch=True).filter(
    lambda n: n not in OPENAI_VALUES and n not in ANTHROPIC_VALUES
)


def picks(values: Mapping[str, list[Any]], unknown: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """A few fields of `values`, each with one of its values, and maybe an unknown field."""
    names = st.lists(st.sampled_from(sorted(values)), max_size=5, unique=True)
    chosen = names.flatmap(lambda ns: st.fixed_dictionaries({n: st.sampled_from(values[n]) for n in ns}))
    extra = st.dictionaries(UNKNOWN, st.just(1), max_size=1 if unknown else 0)
    return st.tuples(chosen, extra).map(lambda pair: {**pair[0], **pair[1]})


def _user(out: Mapping[str, Any]) -> Any:
    return (out.get("metadata") or {}).get("user_id")


# Where each carried OpenAI field shows in the Messages body (value: the field's value); a
# neutral value may show nowhere.
ON_ANTHROPIC: Mapping[str, Callable[[Mapping[str, Any], Any], bool]] = {
    "max_tokens": lambda out, v: out["max_tokens"] == v,
    "max_completion_tokens": lambda out, v: out["max_tokens"] == v,
    "temperature": lambda out, v: out.get("temperature") == v,
    "top_p": lambda out, v: out.get("top_p") == v,
    "top_k": lambda out, v: out.get("top_k") == v,
    "stop": lambda out, v: out.get("stop_sequences") == ([v] if isinstance(v, str) else v),
    "user": lambda out, v: _user(out) == v,
    "tools": lambda out, v: [t["name"] for t in out.get("tools", [])][: len(v)] == ["get"] * len(v),
    "tool_choice": lambda out, v: "type" in out.get("tool_choice", {}),
    "parallel_tool_calls": lambda out, v: v or out["tool_choice"].get("disable_parallel_tool_use") is True,
    "response_format": lambda out, v: v["type"] == "text" or out["tool_choice"]["name"] == RESPONSE_TOOL,
    "reasoning_effort": lambda out, v: v == "none" or out["thinking"]["type"] == "enabled",
    "n": lambda out, v: v == 1,
    "logprobs": lambda out, v: v is False,
    "store": lambda out, v: v is False,
    "stream": lambda out, v: v is False,
    "service_tier": lambda out, v: v == "auto",
    "frequency_penalty": lambda out, v: v == 0,
    "presence_penalty": lambda out, v: v == 0,
    "modalities": lambda out, v: v == ["text"],
}
ON_OPENAI: Mapping[str, Callable[[Mapping[str, Any], Any], bool]] = {
    "system": lambda out, v: out["messages"][0]["role"] == "system",
    "temperature": lambda out, v: out.get("temperature") == v,
    "top_p": lambda out, v: out.get("top_p") == v,
    "stop_sequences": lambda out, v: out.get("stop") == v,
    "metadata": lambda out, v: out.get("user") == v["user_id"],
    "tools": lambda out, v: [t["function"]["name"] for t in out.get("tools", [])] == [t["name"] for t in v],
    "tool_choice": lambda out, v: "tool_choice" in out,
    "thinking": lambda out, v: v["type"] == "disabled" or "reasoning_effort" in out,
}


@settings(max_examples=300)
@given(picks(OPENAI_VALUES))
def test_an_openai_shaped_body_is_carried_or_refused_on_every_kind(extra: dict[str, Any]) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}
    for kind in fields.REGISTRY:
        found = fields.refusal(body, kind, 4096)
        if found is not None:
            assert found.field in body, (kind, found)
            continue
        if kind in fields.PASS_THROUGH:
            assert wire_body(body)[1] == body  # sent as given
            continue
        try:
            out = openai_to_anthropic(body, model="m", default_max_tokens=4096)
        except BadRequestError:
            continue  # refused before sending: nothing dropped
        for name, value in extra.items():
            assert name in ON_ANTHROPIC, f"{name} went to {kind} unrefused and unaccounted for"
            assert ON_ANTHROPIC[name](out, value), (kind, name, value, out)


@settings(max_examples=300)
@given(st.one_of(picks(ANTHROPIC_VALUES), picks(ANTHROPIC_CARRYABLE, unknown=False)))
def test_an_anthropic_shaped_body_is_whole_on_anthropic_and_carried_or_refused_elsewhere(
    extra: dict[str, Any],
) -> None:
    params = {"model": "c", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], **extra}
    body = {**messages_to_chat(params), MESSAGES_PARAMS: params}
    for kind in fields.REGISTRY:
        found = fields.refusal(body, kind)
        if kind == "anthropic":
            assert found is None
            assert openai_to_anthropic(body, model="c", default_max_tokens=1) == params
            continue
        if found is not None:
            assert found.field in params or found.field in MESSAGES_REFUSED, (kind, found)
            continue
        sent = wire_body(body)[1]
        for name, value in extra.items():
            assert name in MESSAGES_CARRIED, f"{name} went to {kind} unrefused"
            assert ON_OPENAI[name](sent, value), (kind, name, value, sent)


# Gemini and Bedrock nest what they are sent (generationConfig, inferenceConfig, toolConfig): a
# field is carried when the translation with it differs from the translation without it — but a
# value that asks for the default (n 1, logprobs false, ...) may change nothing.
TRANSLATORS: Mapping[str, Callable[[Mapping[str, Any]], Any]] = {
    "gemini": openai_to_gemini,
    "bedrock": lambda body: openai_to_converse(body, default_max_tokens=4096),
}
NEUTRAL: list[tuple[str, Any]] = [
    ("n", 1), ("logprobs", False), ("store", False), ("stream", False), ("parallel_tool_calls", True),
    ("frequency_penalty", 0), ("presence_penalty", 0), ("service_tier", "auto"),
    ("modalities", ["text"]), ("response_format", {"type": "text"}), ("reasoning_effort", "none"),
    ("tool_choice", "auto"), ("stream_options", {"include_usage": True}), ("max_tokens", 4096),
    ("max_completion_tokens", 4096), ("top_p", 1), ("temperature", 0),
]  # fmt: skip


@settings(max_examples=300)
@given(picks(OPENAI_VALUES))
@pytest.mark.parametrize("kind", sorted(TRANSLATORS))
def test_on_gemini_and_bedrock_every_field_not_refused_changes_what_is_sent(
    kind: str, extra: dict[str, Any]
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}
    if fields.refusal(body, kind, 4096) is not None:
        return  # refused at validation, naming a field of the body (the test above)
    translate = TRANSLATORS[kind]
    sent = translate(body)
    for name, value in extra.items():
        if (name, value) in NEUTRAL:
            continue
        try:
            without = translate({k: v for k, v in body.items() if k != name})
        except UnsupportedField:
            continue  # another field needs it (tool_choice without its tools): it was used
        assert without != sent, f"{name}={value!r} went to {kind} and changed nothing: dropped"
