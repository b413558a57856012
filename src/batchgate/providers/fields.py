"""Which request fields each target kind carries and which it refuses: the one registry, built from
each translation module's `CARRIED` / `REFUSED`, and the check validation makes with it.

A field is never dropped on the way to a provider: it is carried (sent as given, or translated to
the target's equivalent) or refused at validation, before the job exists (`jobs/fits.py` asks
`refusal` for every target of a line's route; the proxy answers 400), naming the field and the
target. OpenAI-wire kinds (openai, azure) are sent an OpenAI body as given, so every field of it
is carried — fields beyond the OpenAI set too, for servers (vLLM, ...) that take more. An
Anthropic-shaped line (`endpoints.MESSAGES_PARAMS`) goes whole to an Anthropic target; to any
other kind it goes as the OpenAI body it means, refused where that body cannot carry a field
(`messages_in.refusal`).

`python -m batchgate.providers.fields` prints the field × target-kind table of docs/fields.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from batchgate import messages_in
from batchgate.config import GatewayConfig, ProviderConfig
from batchgate.endpoints import CHAT, MESSAGES_PARAMS, endpoint_of
from batchgate.errors import UnsupportedField
from batchgate.providers import bedrock_translate, gemini_translate, translate
from batchgate.request_fields import OWN_FIELDS

Translation = tuple[frozenset[str], Mapping[str, str]]  # (CARRIED, REFUSED) of one target kind

# Every top-level field of an OpenAI Chat Completions body (OpenAI's API reference, "Create chat
# completion"), the rows of the table.
OPENAI_CHAT_FIELDS: frozenset[str] = frozenset(
    {
        "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
        "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
        "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key",
        "prompt_cache_retention", "reasoning_effort", "response_format", "safety_identifier", "seed",
        "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice",
        "tools", "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
    }
)  # fmt: skip
EXTRA_FIELDS = ("top_k",)  # not OpenAI's, carried where a target has them (shown in the table)

REGISTRY: dict[str, Translation] = {
    "openai": (OPENAI_CHAT_FIELDS, {}),
    "azure": (OPENAI_CHAT_FIELDS, {}),
    "anthropic": (translate.CARRIED, translate.REFUSED),
    "gemini": (gemini_translate.CARRIED, gemini_translate.REFUSED),
    "bedrock": (bedrock_translate.CARRIED, bedrock_translate.REFUSED),
}
PASS_THROUGH = frozenset({"openai", "azure"})  # the body is sent as given: nothing is translated
# A kind's whole translation, when it can refuse more than top-level fields (nested ones: tool
# shapes, message keys): it raises `UnsupportedField`. Kinds without one are checked by REGISTRY.
CHECKS: dict[str, Callable[[Mapping[str, Any], int], None]] = {
    "anthropic": translate.translate_fields,
    "gemini": lambda body, _max: _translated(gemini_translate.openai_to_gemini(body)),
    "bedrock": lambda body, max_tokens: _translated(
        bedrock_translate.openai_to_converse(body, default_max_tokens=max_tokens)
    ),
}
_OWN = frozenset({MESSAGES_PARAMS, *OWN_FIELDS})  # batchgate's own: never sent


def _translated(_body: Mapping[str, Any]) -> None:
    """A whole translation run only for what it refuses (its `UnsupportedField`)."""


def refusal(body: Mapping[str, Any], kind: str, default_max_tokens: int = 4096) -> UnsupportedField | None:
    """The first field of `body` (a chat body) a `kind` target cannot carry, or None
    (`default_max_tokens`: the target's, for a body that gives none)."""
    params = body.get(MESSAGES_PARAMS)
    if params is not None:
        if kind == "anthropic":
            return None  # sent whole
        found = messages_in.refusal(params, kind)
        if found is not None:
            return found
    if kind in PASS_THROUGH:
        return None
    check = CHECKS.get(kind)
    if check is not None:
        try:
            check({k: v for k, v in body.items() if k not in _OWN and ":" not in k}, default_max_tokens)
        except UnsupportedField as exc:
            return exc if params is None else _as_given(exc, params)
        return None
    carried, refused = REGISTRY[kind]
    for name, value in body.items():
        if value is not None and name not in carried and name not in _OWN and ":" not in name:
            return UnsupportedField(name, kind, refused.get(name, "not a field its translation knows"))
    return None


# An Anthropic-shaped line's field whose OpenAI translation a target refused: named as the file has it.
_FROM_MESSAGES = {"user": "metadata", "stop": "stop_sequences", "reasoning_effort": "thinking"}


def _as_given(exc: UnsupportedField, params: Mapping[str, Any]) -> UnsupportedField:
    """`exc` (about the OpenAI body an Anthropic line means) naming the line's own field."""
    name = exc.field.split("[", 1)[0].split(".", 1)[0]
    given = name if name in params else _FROM_MESSAGES.get(name, "messages")
    if given == exc.field:
        return exc
    return UnsupportedField(given, exc.target_kind, f"as {exc.field!r}: {exc.reason}")


def route_refusal(config: GatewayConfig, body: Mapping[str, Any]) -> str | None:
    """Why some target of the chat body's route cannot carry one of its fields (one line naming
    the field and the target), or None — a route with such a target would fail over to it."""
    model = body.get("model")
    for route in config.routes:
        if route.model == model:
            return targets_refusal([config.provider(t.provider) for t in route.targets], body)
    return None


def targets_refusal(providers: Sequence[ProviderConfig], body: Mapping[str, Any]) -> str | None:
    """`route_refusal` for the route's providers, known already (validation's `RouteFit`)."""
    if endpoint_of(body) != CHAT:
        return None
    for p in providers:
        found = refusal(body, p.kind, p.default_max_tokens)
        if found is not None:
            return f"{found.message} (target {p.name!r} of route {body.get('model')!r})"
    return None


def _cell(kind: str, name: str) -> str:
    carried, refused = REGISTRY[kind]
    if kind in PASS_THROUGH or name in carried:
        return "sent as given" if kind in PASS_THROUGH else "carried"
    return f"refused: {refused.get(name, 'not a field its translation knows')}"


def _messages_cell(kind: str, name: str) -> str:
    if kind == "anthropic":
        return "sent whole"
    if name in messages_in.CARRIED:
        return "carried (as the OpenAI body)"
    return f"refused: {messages_in.REFUSED.get(name, 'not a field batchgate can translate')}"


def table() -> str:
    """The markdown of docs/fields.md: OpenAI-shaped and Anthropic-shaped fields × target kind."""
    kinds = sorted(REGISTRY)
    head = ["| field | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    rows = sorted(OPENAI_CHAT_FIELDS) + list(EXTRA_FIELDS)
    openai = [f"| `{n}` | " + " | ".join(_cell(k, n) for k in kinds) + " |" for n in rows]
    names = sorted(messages_in.CARRIED | set(messages_in.REFUSED))
    anthropic = [f"| `{n}` | " + " | ".join(_messages_cell(k, n) for k in kinds) + " |" for n in names]
    return "\n".join(
        [
            "# Request fields × target kinds",
            "",
            "Generated by `python -m batchgate.providers.fields` (a test fails when this file differs).",
            "Each field of a request is carried to a target (sent as given, or translated to its",
            "equivalent) or refused when the input is validated, before the job exists: the error",
            "names the line, the field and the target. No field is dropped on the way.",
            "",
            "## OpenAI-shaped lines (chat completions)",
            "",
            *head,
            *openai,
            "",
            "## Anthropic-shaped lines (Message Batches `params`, the proxy's `/v1/messages`)",
            "",
            "`cache_control` is refused wherever it appears (a block, a tool) for a target that",
            "is not Anthropic; so are `thinking` and `document` blocks, server tools and tool",
            "results marked `is_error` or holding images.",
            "",
            *head,
            *anthropic,
            "",
            "## Answers",
            "",
            "An Anthropic answer comes back as a `chat.completion`: `tool_use` blocks as `tool_calls`,",
            "stop reasons as finish reasons (`end_turn`, `stop_sequence` → `stop`, `max_tokens` →",
            "`length`, `tool_use` → `tool_calls`, `refusal` → `content_filter`), a forced",
            "`response_format` tool's input as the message content (finish `stop`), cache reads",
            "and writes in `prompt_tokens` with reads as `cached_tokens`. Anthropic counts thinking",
            "inside `output_tokens` and reports no split, so no `reasoning_tokens` is invented. The",
            "proxy's `/v1/messages` answers in the Anthropic shape: tool calls as `tool_use` blocks,",
            "`cached_tokens` as `cache_read_input_tokens`.",
            "",
        ]
    )


if __name__ == "__main__":
    print(table(), end="")
