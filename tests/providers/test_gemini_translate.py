"""OpenAI chat and embeddings bodies as Gemini bodies, and Gemini's answers back (pure)."""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest

from batchgate.errors import ConfigError, UnsupportedField
from batchgate.providers.gemini_answer import embeddings_to_openai, gemini_to_openai, usage_of
from batchgate.providers.gemini_translate import (
    CARRIED,
    REFUSED,
    check_fields,
    embedding_request,
    openai_to_gemini,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "find a thing",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def test_messages_system_and_roles() -> None:
    out = openai_to_gemini(
        {
            "model": "gemini-2.5-flash",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "developer", "content": [{"type": "text", "text": "and kind"}]},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"},
            ],
        }
    )
    assert out["systemInstruction"] == {"parts": [{"text": "be brief\n\nand kind"}]}
    assert out["contents"] == [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"text": "hello"}]},
        {"role": "user", "parts": [{"text": "again"}]},
    ]
    assert "model" not in out  # the model goes in the URL
    assert "generationConfig" not in out


def test_generation_config() -> None:
    out = openai_to_gemini(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "max_completion_tokens": 50,
            "temperature": 0.2,
            "top_p": 0.9,
            "top_k": 40,
            "n": 2,
            "stop": "END",
            "presence_penalty": 0.1,
            "frequency_penalty": 0.3,
            "seed": 7,
            "reasoning_effort": "low",
        }
    )
    assert out["generationConfig"] == {
        "maxOutputTokens": 50,
        "temperature": 0.2,
        "topP": 0.9,
        "topK": 40,
        "candidateCount": 2,
        "stopSequences": ["END"],
        "presencePenalty": 0.1,
        "frequencyPenalty": 0.3,
        "seed": 7,
        "thinkingConfig": {"thinkingBudget": 1024},
    }


def test_logprobs_go_and_come_back() -> None:
    out = openai_to_gemini(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 2}
    )
    assert out["generationConfig"] == {"responseLogprobs": True, "logprobs": 2}
    answer = {
        "candidates": [
            {
                "content": {"parts": [{"text": "Hi"}]},
                "finishReason": "STOP",
                "logprobsResult": {
                    "chosenCandidates": [{"token": "Hi", "logProbability": -0.1}],
                    "topCandidates": [
                        {
                            "candidates": [
                                {"token": "Hi", "logProbability": -0.1},
                                {"token": "Yo", "logProbability": -2.5},
                            ]
                        }
                    ],
                },
            }
        ]
    }
    logprobs = gemini_to_openai(answer, model="m", created=0)["choices"][0]["logprobs"]
    assert logprobs["content"][0]["token"] == "Hi"
    assert logprobs["content"][0]["logprob"] == -0.1
    assert logprobs["content"][0]["bytes"] == [72, 105]
    assert [t["token"] for t in logprobs["content"][0]["top_logprobs"]] == ["Hi", "Yo"]


def test_response_format_json_schema_becomes_response_schema() -> None:
    schema = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
    out = openai_to_gemini(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
        }
    )
    assert out["generationConfig"] == {"responseMimeType": "application/json", "responseSchema": schema}
    plain = openai_to_gemini(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_object"},
        }
    )
    assert plain["generationConfig"] == {"responseMimeType": "application/json"}


def test_tools_tool_choice_and_a_tool_round_trip() -> None:
    out = openai_to_gemini(
        {
            "model": "m",
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "lookup"}},
            "messages": [
                {"role": "user", "content": "find x"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": '{"found": true}'},
                {"role": "tool", "tool_call_id": "c1", "content": "plain text"},
            ],
        }
    )
    assert out["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "lookup",
                    "description": "find a thing",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                }
            ]
        }
    ]
    assert out["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}}
    assert out["contents"][1] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "lookup", "args": {"q": "x"}}}],
    }
    assert out["contents"][2]["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"found": True}}}
    ]
    assert out["contents"][3]["parts"][0]["functionResponse"]["response"] == {"content": "plain text"}
    for choice, mode in (("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")):
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": choice}
        assert openai_to_gemini(body)["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_images_inline_and_by_uri() -> None:
    out = openai_to_gemini(
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is this"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                    ],
                }
            ],
        }
    )
    assert out["contents"][0]["parts"] == [
        {"text": "what is this"},
        {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}},
    ]


@pytest.mark.parametrize("field", sorted(REFUSED))
def test_every_refused_field_is_refused_with_its_name(field: str) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], field: True}
    with pytest.raises(UnsupportedField) as caught:
        openai_to_gemini(body)
    assert caught.value.field == field
    assert caught.value.target_kind == "gemini"
    assert isinstance(caught.value, ConfigError)


def test_an_unknown_field_is_refused_not_dropped() -> None:
    with pytest.raises(UnsupportedField, match="brand_new_field"):
        check_fields({"model": "m", "brand_new_field": 1})


def test_carried_and_refused_do_not_overlap() -> None:
    assert not CARRIED & set(REFUSED)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "tool_call_id": "nobody", "content": "x"}]}, "messages"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "code"}]}, "tools"),
        ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"}, "tool_choice"),
        ({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"}, "reasoning_effort"),
        (
            {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}},
            "response_format",
        ),
    ],
)
def test_what_cannot_be_expressed_is_refused(body: dict[str, Any], field: str) -> None:
    with pytest.raises(UnsupportedField) as caught:
        openai_to_gemini(body)
    assert caught.value.field == field


def test_answer_text_thoughts_and_usage() -> None:
    answer = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"text": "thinking…", "thought": True}, {"text": "Hi"}],
                },
                "finishReason": "MAX_TOKENS",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 3,
            "thoughtsTokenCount": 5,
            "cachedContentTokenCount": 4,
            "totalTokenCount": 18,
        },
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "r1",
    }
    out = gemini_to_openai(answer, model="gemini-2.5-flash", created=5)
    assert out["id"] == "r1"
    assert out["model"] == "gemini-2.5-flash-001"
    assert out["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi"},
            "finish_reason": "length",
            "logprobs": None,
        }
    ]
    assert out["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 8,
        "total_tokens": 18,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 5},
    }


def test_answer_function_calls_become_tool_calls() -> None:
    answer = {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"name": "lookup", "args": {"q": "x"}}}]},
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
    }
    choice = gemini_to_openai(answer, model="m", created=0)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_0_0", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"x"}'}}
        ],
    }


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("STOP", "stop"), ("SAFETY", "content_filter"), ("RECITATION", "content_filter"), ("OTHER", "stop")],
)
def test_finish_reasons(reason: str, finish: str) -> None:
    answer = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}
    assert gemini_to_openai(answer, model="m", created=0)["choices"][0]["finish_reason"] == finish


def test_a_blocked_prompt_is_one_content_filter_choice() -> None:
    out = gemini_to_openai({"promptFeedback": {"blockReason": "SAFETY"}}, model="m", created=0)
    assert out["choices"][0]["finish_reason"] == "content_filter"
    assert out["choices"][0]["message"]["content"] is None


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"candidates": "x"},
        {"candidates": [1]},
        {"candidates": [], "usageMetadata": {"promptTokenCount": -1}},
    ],
)
def test_what_is_not_an_answer_raises_value_error(answer: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"\w"):
        gemini_to_openai(answer, model="m", created=0)


def test_usage_of_nothing_is_zero() -> None:
    assert usage_of(None)["total_tokens"] == 0


def test_embeddings_one_and_many() -> None:
    action, body = embedding_request({"model": "e", "input": "hi", "dimensions": 8}, "text-embedding-004")
    assert action == "embedContent"
    assert body == {"content": {"parts": [{"text": "hi"}]}, "outputDimensionality": 8}
    action, body = embedding_request({"model": "e", "input": ["a", "b"]}, "text-embedding-004")
    assert action == "batchEmbedContents"
    assert body["requests"][1] == {
        "model": "models/text-embedding-004",
        "content": {"parts": [{"text": "b"}]},
    }
    with pytest.raises(UnsupportedField, match="user"):
        embedding_request({"model": "e", "input": "x", "user": "u"}, "m")
    with pytest.raises(UnsupportedField, match="token arrays"):
        embedding_request({"model": "e", "input": [[1, 2]]}, "m")


def test_embeddings_answer_floats_and_base64() -> None:
    one = embeddings_to_openai({"embedding": {"values": [0.5, 1.0]}}, model="e", base64_floats=False)
    assert one["data"] == [{"object": "embedding", "index": 0, "embedding": [0.5, 1.0]}]
    many = embeddings_to_openai(
        {"embeddings": [{"values": [0.5]}, {"values": [2.0]}]}, model="e", base64_floats=True
    )
    assert struct.unpack("<f", base64.b64decode(many["data"][1]["embedding"])) == (2.0,)
    with pytest.raises(ValueError, match="embedding"):
        embeddings_to_openai({"embeddings": []}, model="e", base64_floats=False)
