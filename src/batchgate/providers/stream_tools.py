"""Tool calls in a streamed answer, decoded from each provider's events into `ToolDelta`s — a
call's start (its index among the answer's calls, its id and name), a piece of its JSON
arguments, its end — which `stream_events.Decoder` (and `bedrock_stream.FrameDecoder`) put on
their `StreamEvent`s and `stream_render.Renderer` writes in the client's format:
- chat: `delta.tool_calls[]` (`index`; `id` and `function.name` on a call's first delta, then
  `function.arguments` pieces; no end of its own: the finish ends them)
  (https://platform.openai.com/docs/api-reference/chat-streaming);
- Responses: `response.output_item.added` of type `function_call`,
  `response.function_call_arguments.delta`, `response.output_item.done`
  (https://platform.openai.com/docs/api-reference/responses-streaming);
- Messages: `content_block_start` of type `tool_use`, `content_block_delta` of type
  `input_json_delta` (`partial_json`), `content_block_stop`
  (https://docs.anthropic.com/en/docs/build-with-claude/streaming);
- Gemini: a `functionCall` part, whole in one chunk (its id as `gemini_answer` names it);
- Bedrock: `contentBlockStart.start.toolUse`, `contentBlockDelta.delta.toolUse.input`,
  `contentBlockStop`.

`Calls` keeps one stream's calls: the provider's block indexes (Messages' and Bedrock's count
text blocks too) as call indexes, and the forced tool through which batchgate asked for a JSON
`response_format` (`translate_tools.RESPONSE_TOOL`, a Responses `text.format`'s schema tool,
`bedrock_translate.output_tool`): its argument pieces are the answer's text, as the answers read
whole take its input as the content; its finish `tool_use` is the answer's `stop`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchgate.providers.gemini_answer import tool_call


@dataclass(slots=True)
class ToolDelta:
    """A piece of one tool call: its start (id, name), arguments (JSON text), end, or several."""

    index: int  # the call's place among the answer's calls (0, 1, ...)
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    start: bool = False
    end: bool = False


Decoded = tuple[list[ToolDelta], str]  # the tool deltas, and text (the forced answer tool's pieces)
_NONE: Decoded = ([], "")


class Calls:
    """One stream's tool calls; see the module docstring."""

    def __init__(self, answer_tool: str | None = None) -> None:
        self.answer_tool = answer_tool
        self._calls: dict[int, int] = {}  # the provider's block index -> the call's index
        self._answer: set[int] = set()  # blocks of the forced answer tool
        self.count = 0  # calls started (the answer tool's not counted)

    def start(self, block: int, call_id: Any, name: Any, arguments: Any = "") -> Decoded:
        args = arguments if isinstance(arguments, str) else ""
        if self.answer_tool is not None and name == self.answer_tool:
            self._answer.add(block)
            return [], args
        index = self._calls.setdefault(block, self.count)
        self.count = max(self.count, index + 1)
        tool = ToolDelta(index, _text(call_id), _text(name), args, start=True)
        return [tool], ""

    def whole(self, call_id: Any, name: Any, arguments: Any) -> Decoded:
        """A call that comes whole (Gemini's): a block of its own."""
        return self.start(-1 - len(self._calls) - len(self._answer), call_id, name, arguments)

    def piece(self, block: int, arguments: Any) -> Decoded:
        if not isinstance(arguments, str) or not arguments:
            return _NONE
        if block in self._answer:
            return [], arguments
        if block not in self._calls:  # a piece of a call whose start never came: it starts here
            return self.start(block, None, None, arguments)
        return [ToolDelta(self._calls[block], arguments=arguments)], ""

    def end(self, block: int) -> Decoded:
        if block not in self._calls:
            return _NONE
        return [ToolDelta(self._calls[block], end=True)], ""

    def finish(self, reason: str) -> str:
        """chat's finish reason for the answer: `tool_calls` once it called a tool (Gemini says
        STOP, as `gemini_answer` reads it), `stop` where only the answer tool was called."""
        if self.count and reason == "stop":
            return "tool_calls"
        if not self.count and self._answer and reason == "tool_calls":
            return "stop"
        return reason


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def chat(delta: dict[str, Any], calls: Calls) -> Decoded:
    """A chunk's `delta.tool_calls`."""
    items = delta.get("tool_calls")
    if not isinstance(items, list):
        return _NONE
    tools: list[ToolDelta] = []
    for item in items:
        if not isinstance(item, dict) or type(item.get("index")) is not int:
            continue
        fn = item.get("function")
        fn = fn if isinstance(fn, dict) else {}
        if item.get("id") is not None:
            got = calls.start(item["index"], item.get("id"), fn.get("name"), fn.get("arguments"))
        else:
            got = calls.piece(item["index"], fn.get("arguments"))
        tools += got[0]
    return tools, ""


def responses(kind: Any, data: dict[str, Any], calls: Calls) -> Decoded:
    """A Responses event's function call: its item added, its arguments' delta, its item done."""
    at = data.get("output_index")
    if type(at) is not int:
        return _NONE
    if kind == "response.function_call_arguments.delta":
        return calls.piece(at, data.get("delta"))
    item = data.get("item")
    if not isinstance(item, dict) or item.get("type") != "function_call":
        return _NONE
    if kind == "response.output_item.added":
        return calls.start(at, item.get("call_id"), item.get("name"), item.get("arguments"))
    return calls.end(at) if kind == "response.output_item.done" else _NONE


def messages(kind: Any, data: dict[str, Any], calls: Calls) -> Decoded:
    """A Messages `tool_use` block's start, `input_json_delta` pieces and stop."""
    at = data.get("index")
    if type(at) is not int:
        return _NONE
    if kind == "content_block_delta":
        delta = data.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
            return calls.piece(at, delta.get("partial_json"))
        return _NONE
    if kind == "content_block_start":
        block = data.get("content_block")
        if isinstance(block, dict) and block.get("type") == "tool_use":
            return calls.start(at, block.get("id"), block.get("name"))
        return _NONE
    return calls.end(at) if kind == "content_block_stop" else _NONE


def gemini(parts: list[Any], calls: Calls) -> Decoded:
    """A chunk's `functionCall` parts, each a whole call (start, arguments, end)."""
    tools: list[ToolDelta] = []
    text = ""
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("functionCall"), dict):
            continue
        call = tool_call(0, calls.count, part["functionCall"])
        got, piece = calls.whole(call["id"], call["function"]["name"], call["function"]["arguments"])
        text += piece
        tools += [ToolDelta(t.index, t.id, t.name, t.arguments, start=True, end=True) for t in got]
    return tools, text


def bedrock(name: Any, payload: dict[str, Any], calls: Calls) -> Decoded:
    """A ConverseStream `toolUse` block's start, input pieces and stop."""
    at = payload.get("contentBlockIndex", 0)
    if type(at) is not int:
        return _NONE
    if name == "contentBlockStart":
        start = payload.get("start")
        use = start.get("toolUse") if isinstance(start, dict) else None
        return calls.start(at, use.get("toolUseId"), use.get("name")) if isinstance(use, dict) else _NONE
    if name == "contentBlockDelta":
        delta = payload.get("delta")
        use = delta.get("toolUse") if isinstance(delta, dict) else None
        return calls.piece(at, use.get("input")) if isinstance(use, dict) else _NONE
    return calls.end(at) if name == "contentBlockStop" else _NONE
