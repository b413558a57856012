"""Tool calls in streamed answers: each upstream format's recorded tool-call events (OpenAI chat,
Responses, Anthropic Messages, Gemini, Bedrock) decoded and written in each client format (chat,
Responses, Messages) — read back, every call's id, name and arguments are the provider's and the
answer says it called a tool; each event written is one the official SDK's types accept; the
forced tool of a JSON `response_format` is the answer's text; a light decoder passes tool-call
events on unparsed (counted) when the formats match and a full one parses them all."""

from __future__ import annotations

import functools
from typing import Any

import anthropic.types
import orjson
import pytest
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.emulator.event_stream import event
from batchgate.endpoints import ENDPOINT_KEY, RESPONSES
from batchgate.providers import make_chat_client
from batchgate.providers.bedrock_stream import FrameDecoder
from batchgate.providers.h1 import H1Transport
from batchgate.providers.responses_translate import SCHEMA_TOOL
from batchgate.providers.sse import SSEReader
from batchgate.providers.stream_call import stream_request
from batchgate.providers.stream_events import Decoder, Format, StreamEvent
from batchgate.providers.stream_render import Renderer
from batchgate.providers.translate_tools import RESPONSE_TOOL

WEATHER = {"location": "Paris, FR", "units": ["c", "f"], "note": 'say "hi"'}
TIME = {"zone": "Europe/Paris"}
PIECES = ['{"location": "Pa', 'ris, FR", "units": ["c",', ' "f"], "note": "say \\"hi\\""}']
ARGS = "".join(PIECES)  # WEATHER's JSON, as the provider wrote it


def _sse(name: str | None, data: dict[str, Any]) -> bytes:
    head = b"" if name is None else b"event: " + name.encode() + b"\n"
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 5, "model": "gpt-4o"}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return _sse(None, {**HEAD, "choices": [choice]})


def _call(index: int, call_id: str, name: str) -> dict[str, Any]:
    function = {"name": name, "arguments": ""}
    return {"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]}


def _args(index: int, piece: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


USAGE = {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}
# https://platform.openai.com/docs/api-reference/chat-streaming: a call's id and name first, then
# its arguments' pieces; two calls one after the other; finish_reason tool_calls
CHAT = b"".join(
    (
        _chunk({"role": "assistant", "content": None, **_call(0, "call_w", "get_weather")}),
        *(_chunk(_args(0, p)) for p in PIECES),
        _chunk(_call(1, "call_t", "get_time")),
        _chunk(_args(1, orjson.dumps(TIME).decode())),
        _chunk({}, "tool_calls"),
        _sse(None, {**HEAD, "choices": [], "usage": USAGE}),
        b"data: [DONE]\n\n",
    )
)


def _m(name: str, **fields: Any) -> bytes:
    return _sse(name, {"type": name, **fields})


def _messages(tool: str | None = "get_weather", text: str = "Let me check.") -> bytes:
    """https://docs.anthropic.com/en/docs/build-with-claude/streaming: a text block, then a
    `tool_use` block whose input comes as `input_json_delta` pieces; stop_reason tool_use (with
    `tool` None: the text alone, end_turn)."""
    use: dict[str, Any] = {"type": "tool_use", "id": "toolu_w", "name": tool, "input": {}}
    text_blocks = (
        _m("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        _m("content_block_delta", index=0, delta={"type": "text_delta", "text": text}),
        _m("content_block_stop", index=0),
    )
    at = len(text_blocks) // 3
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [],
               "usage": {"input_tokens": 20, "output_tokens": 1}}  # fmt: skip
    tool_blocks = (
        _m("content_block_start", index=at, content_block=use),
        _m("content_block_delta", index=at, delta={"type": "input_json_delta", "partial_json": ""}),
        *(
            _m("content_block_delta", index=at, delta={"type": "input_json_delta", "partial_json": p})
            for p in PIECES
        ),
        _m("content_block_stop", index=at),
    )
    stop = "end_turn" if tool is None else "tool_use"
    return b"".join(
        (
            _m("message_start", message=message),
            *(text_blocks if text else ()),
            *(tool_blocks if tool is not None else ()),
            _m(
                "message_delta",
                delta={"stop_reason": stop, "stop_sequence": None},
                usage={"output_tokens": 9},
            ),
            _m("message_stop"),
        )
    )


def _responses() -> bytes:
    """https://platform.openai.com/docs/api-reference/responses-streaming: a function_call item
    added, its arguments' deltas and done, the item done, the response completed."""
    seq = iter(range(100))

    def ev(name: str, **fields: Any) -> bytes:
        return _sse(name, {"type": name, "sequence_number": next(seq), **fields})

    item = {"id": "fc_1", "type": "function_call", "call_id": "call_w", "name": "get_weather",
            "arguments": "", "status": "in_progress"}  # fmt: skip
    done = {**item, "arguments": ARGS, "status": "completed"}
    response = {"id": "resp_1", "object": "response", "created_at": 5, "model": "gpt-4o", "output": []}
    usage = {"input_tokens": 20, "output_tokens": 9}
    return b"".join(
        (
            ev("response.created", response={**response, "status": "in_progress"}),
            ev("response.output_item.added", output_index=0, item=item),
            *(
                ev("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta=p)
                for p in PIECES
            ),
            ev("response.function_call_arguments.done", item_id="fc_1", output_index=0, arguments=ARGS),
            ev("response.output_item.done", output_index=0, item=done),
            ev(
                "response.completed",
                response={**response, "status": "completed", "output": [done], "usage": usage},
            ),
        )
    )


def _gemini() -> bytes:
    """A text chunk, then the last chunk with two `functionCall` parts (whole) and finishReason
    STOP (Gemini's: a call's finish is STOP)."""
    ids = {"modelVersion": "gemini-2.5-flash", "responseId": "r1"}
    text = {"candidates": [{"content": {"parts": [{"text": "Checking."}], "role": "model"}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 20, "totalTokenCount": 20}, **ids}  # fmt: skip
    calls = [{"functionCall": {"name": "get_weather", "args": WEATHER}},
             {"functionCall": {"name": "get_time", "args": TIME}}]  # fmt: skip
    candidate = {"content": {"parts": calls, "role": "model"}, "finishReason": "STOP", "index": 0}
    counts = {"promptTokenCount": 20, "candidatesTokenCount": 9, "totalTokenCount": 29}
    last = {"candidates": [candidate], "usageMetadata": counts, **ids}
    return b"data: " + orjson.dumps(text) + b"\r\n\r\n" + b"data: " + orjson.dumps(last) + b"\r\n\r\n"


def _bedrock(tool: str = "get_weather") -> bytes:
    use = {"toolUse": {"toolUseId": "tooluse_w", "name": tool}}
    return b"".join(
        (
            event("messageStart", {"role": "assistant"}),
            event("contentBlockDelta", {"delta": {"text": "Let me check."}, "contentBlockIndex": 0}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("contentBlockStart", {"start": use, "contentBlockIndex": 1}),
            *(
                event("contentBlockDelta", {"delta": {"toolUse": {"input": p}}, "contentBlockIndex": 1})
                for p in PIECES
            ),
            event("contentBlockStop", {"contentBlockIndex": 1}),
            event("messageStop", {"stopReason": "tool_use"}),
            event(
                "metadata",
                {
                    "usage": {"inputTokens": 20, "outputTokens": 9, "totalTokens": 29},
                    "metrics": {"latencyMs": 40},
                },
            ),
        )
    )


# each upstream: its bytes, and the calls it makes (id, name, arguments) and its text
UPSTREAM: dict[str, tuple[bytes, list[tuple[str, str, Any]], str]] = {
    "chat": (CHAT, [("call_w", "get_weather", WEATHER), ("call_t", "get_time", TIME)], ""),
    "responses": (_responses(), [("call_w", "get_weather", WEATHER)], ""),
    "messages": (_messages(), [("toolu_w", "get_weather", WEATHER)], "Let me check."),
    "gemini": (
        _gemini(),
        [("call_0_0", "get_weather", WEATHER), ("call_0_1", "get_time", TIME)],
        "Checking.",
    ),
    "bedrock": (_bedrock(), [("tooluse_w", "get_weather", WEATHER)], "Let me check."),
}


def _decoded(fmt: str, raw: bytes, answer_tool: str | None = None) -> list[StreamEvent]:
    if fmt == "bedrock":
        frames = FrameDecoder("rid-1", answer_tool)
        return [ev for i in range(0, len(raw), 11) for ev in frames.feed(raw[i : i + 11])]
    decoder = Decoder(fmt, answer_tool=answer_tool)  # type: ignore[arg-type]
    reader, out = SSEReader(), []
    for i in range(0, len(raw), 11):  # any split of the reads
        out += decoder.decode_all(reader.split(raw[i : i + 11]))
    assert decoder.ended
    return out


def _read_back(fmt: Format, written: bytes) -> tuple[list[tuple[str, str, Any]], str, str | None]:
    """The calls (id, name, arguments parsed), text and finish a client of `fmt` reads."""
    events = _decoded(fmt, written)
    calls: dict[int, list[str]] = {}
    for tool in (t for ev in events for t in ev.tools):
        entry = calls.setdefault(tool.index, [tool.id or "", tool.name or "", ""])
        entry[2] += tool.arguments
    finish = [ev.finish for ev in events if ev.finish]
    read = [(i, n, orjson.loads(a)) for i, n, a in (calls[k] for k in sorted(calls))]
    return read, "".join(ev.text for ev in events), finish[-1] if finish else None


@functools.cache
def _adapters() -> dict[str, TypeAdapter[Any]]:
    return {
        "responses": TypeAdapter(ResponseStreamEvent),
        "messages": TypeAdapter(anthropic.types.RawMessageStreamEvent),
    }


def _bodies(written: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(e.data) for e in SSEReader().feed(written) if e.data != b"[DONE]"]


def _sdk_checked(fmt: Format, written: bytes) -> list[dict[str, Any]]:
    """Each event written, as the official SDK's types accept it."""
    bodies = _bodies(written)
    for body in bodies:
        if fmt == "chat":
            ChatCompletionChunk.model_validate(body)
        elif body.get("type") != "ping":
            _adapters()[fmt].validate_python(body)
    return bodies


@pytest.mark.parametrize("client", ["chat", "responses", "messages"])
@pytest.mark.parametrize("upstream", list(UPSTREAM))
def test_a_tool_call_stream_of_each_upstream_reads_the_same_in_each_client_format(
    upstream: str, client: Format
) -> None:
    raw, calls, text = UPSTREAM[upstream]
    renderer = Renderer(client, include_usage=True, model="route", now=1000.0)
    written = b"".join(renderer.render(ev) for ev in _decoded(upstream, raw))
    if upstream == client:
        assert written == raw  # the provider's own bytes, passed through
    read, read_text, finish = _read_back(client, written)
    assert read == calls  # ids, names kept; arguments' JSON whole again
    assert read_text == text
    assert finish == "tool_calls"
    bodies = _sdk_checked(client, written) if upstream != client else _bodies(written)
    if client == "chat":
        finishes = [b["choices"][0]["finish_reason"] for b in bodies if b["choices"]]
        assert finishes[-1] == "tool_calls"
    elif client == "messages":
        assert [b["delta"]["stop_reason"] for b in bodies if b["type"] == "message_delta"] == ["tool_use"]
        starts = [b["content_block"] for b in bodies if b["type"] == "content_block_start"]
        assert [s["type"] for s in starts] == ["text"] * bool(text) + ["tool_use"] * len(calls)
        assert [b["index"] for b in bodies if b["type"] == "content_block_start"] == list(range(len(starts)))
    else:
        final = bodies[-1]["response"]
        assert bodies[-1]["type"] == "response.completed"
        items = [i for i in final["output"] if i["type"] == "function_call"]
        got = [(i["call_id"], i["name"], orjson.loads(i["arguments"])) for i in items]
        assert got == calls
        added = [b["item"]["type"] for b in bodies if b["type"] == "response.output_item.added"]
        assert added == [i["type"] for i in final["output"]]  # each item added, in order
        assert ("message" in added) == bool(text)  # no empty message beside a call


def test_the_forced_tool_of_a_json_answer_is_the_answers_text() -> None:
    """A chat `response_format` asked of Anthropic (forced `json_response`) or Bedrock (its output
    tool): the tool's input is the content and the finish is `stop`, as an answer read whole."""
    for upstream, raw in (("messages", _messages(RESPONSE_TOOL, "")), ("bedrock", _bedrock("out"))):
        events = _decoded(upstream, raw, answer_tool=RESPONSE_TOOL if upstream == "messages" else "out")
        assert not [t for ev in events for t in ev.tools]
        renderer = Renderer("chat", include_usage=False, model="route", now=1000.0)
        read, text, finish = _read_back("chat", b"".join(renderer.render(ev) for ev in events))
        assert read == []
        assert orjson.loads(text.removeprefix("Let me check.")) == WEATHER
        assert finish == "stop"


def test_an_answer_with_text_only_is_one_text_block_opened_with_its_first_piece() -> None:
    renderer = Renderer("responses", include_usage=True, model="r", now=1.0)
    written = b"".join(renderer.render(ev) for ev in _decoded("messages", _messages(None)))
    bodies = _sdk_checked("responses", written)
    assert [b["item"]["type"] for b in bodies if b["type"] == "response.output_item.added"] == ["message"]
    assert bodies[-1]["response"]["output"][0]["content"][0]["text"] == "Let me check."


@pytest.mark.parametrize("upstream", ["chat", "messages", "responses"])
def test_a_light_decoder_passes_tool_call_events_on_as_they_are(upstream: Format) -> None:
    """Formats matching: the events go on unparsed (no tools decoded), their bytes whole, the
    argument pieces counted for what was produced; usage and the end still read."""
    raw = UPSTREAM[upstream][0]
    light = Decoder(upstream, light=True)
    events = light.decode_read(SSEReader(), raw)
    assert b"".join(ev.raw for ev in events) == raw
    assert not [t for ev in events[1:] for t in ev.tools]  # (the first event is parsed)
    assert sum(ev.pieces for ev in events) >= len(PIECES)
    assert [ev.usage for ev in events if ev.usage]
    assert light.ended


@pytest.mark.parametrize("upstream", ["chat", "messages", "responses"])
def test_a_full_decoder_parses_every_tool_call_event_of_a_read(upstream: Format) -> None:
    """Formats differing (`light` off): a read's events all parsed, none passed on unread."""
    raw, calls, _ = UPSTREAM[upstream]
    events = Decoder(upstream).decode_read(SSEReader(), raw)
    assert len(events) == raw.count(b"\n\n")
    starts = [(t.id, t.name) for ev in events for t in ev.tools if t.start]
    assert starts == [(i, n) for i, n, _ in calls]


OBJECT = {"type": "object", "properties": {"city": {"type": "string"}}}
NAMED = {
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": OBJECT}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
}
SCHEMA = {"type": "json_schema", "name": "reply", "schema": OBJECT}
FORCED: dict[str, tuple[dict[str, Any], str | None]] = {
    "json_object": ({"response_format": {"type": "json_object"}}, RESPONSE_TOOL),
    "json_schema": ({"response_format": {"type": "json_schema", "json_schema": SCHEMA}}, RESPONSE_TOOL),
    "responses-schema": ({ENDPOINT_KEY: RESPONSES, "text": {"format": SCHEMA}}, "reply"),
    "responses-object": ({ENDPOINT_KEY: RESPONSES, "text": {"format": {"type": "json_object"}}}, SCHEMA_TOOL),
    "responses-text": ({ENDPOINT_KEY: RESPONSES}, None),
    "named-tool": (NAMED, None),  # a tool the user forced: a call
    "plain": ({}, None),
}


@pytest.mark.parametrize("case", list(FORCED))
def test_the_forced_tool_of_a_json_answer_is_known_to_the_streamed_call(case: str) -> None:
    """A JSON answer asked of Anthropic is a forced tool whose input is the answer (read as text);
    a tool the user forced is a tool call."""
    body, forced = FORCED[case]
    client = make_chat_client(
        ProviderConfig(name="an", kind="anthropic", base_url="https://example.invalid", api_key=Secret("k")),
        H1Transport(),  # nothing is sent
        TimeoutConfig(),
    )
    ask = (
        {"input": "hi"}
        if body.get(ENDPOINT_KEY) == RESPONSES
        else {"messages": [{"role": "user", "content": "hi"}]}
    )
    *_, fmt, answer_tool = stream_request(client, {"model": "m", **ask, **body}, "claude")
    assert fmt == "messages"
    assert answer_tool == forced
