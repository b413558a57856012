"""The field types of a chat request body, checked before anything is sent.

Every input shape is normalised to an OpenAI Chat Completions body, so its fields are checked
against that family's types (the Anthropic fields that survive normalising — `max_tokens`,
`temperature`, `top_p`, `stop` — have the same types there). A wrong type is a line problem at
validation, not a 400 from the provider after the run has begun.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def _integer(minimum: int | None = None) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "an integer"
        if minimum is not None and value < minimum:
            return f"an integer >= {minimum}"
        return None

    return check


def _number(low: float, high: float) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        # tuples, not `int | float`: a union is built anew at each call (a million lines, twice each)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "a number"
        if not low <= value <= high:
            return f"a number from {low:g} to {high:g}"
        return None

    return check


def _boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _string(value: object) -> str | None:
    return None if isinstance(value, str) else "a string"


def _mapping(value: object) -> str | None:
    return None if isinstance(value, dict) else "an object"


def _array(value: object) -> str | None:
    return None if isinstance(value, list) else "an array"


def _stop(value: object) -> str | None:
    if isinstance(value, str) or (isinstance(value, list) and all(isinstance(s, str) for s in value)):
        return None
    return "a string or an array of strings"


def _choice(value: object) -> str | None:
    return None if isinstance(value, (str, dict)) else "a string or an object"


FIELD_TYPES: Mapping[str, Callable[[object], str | None]] = {
    "max_tokens": _integer(1),
    "max_completion_tokens": _integer(1),
    "n": _integer(1),
    "temperature": _number(0, 2),
    "top_p": _number(0, 1),
    "frequency_penalty": _number(-2, 2),
    "presence_penalty": _number(-2, 2),
    "seed": _integer(),
    "top_logprobs": _integer(0),
    "logprobs": _boolean,
    "stream": _boolean,
    "store": _boolean,
    "parallel_tool_calls": _boolean,
    "stop": _stop,
    "user": _string,
    "reasoning_effort": _string,
    "response_format": _mapping,
    "logit_bias": _mapping,
    "metadata": _mapping,
    "tools": _array,
    "tool_choice": _choice,
}


def json_type(value: object) -> str:
    """What JSON calls `value`'s type, with its article ("a string", "an array", "null")."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    return "an object"


def field_type_problem(body: Mapping[str, object]) -> str | None:
    """The first field (in `FIELD_TYPES`' order) whose value has the wrong type or range, as a
    one-line reason (None: fine). The body's own few fields are checked first; only a body with
    a problem is walked in that order, to name the same first one whatever the body's order."""
    for name in body:
        check = FIELD_TYPES.get(name)
        if check is not None and check(body[name]) is not None:
            break
    else:
        return None
    for name, check in FIELD_TYPES.items():
        if name not in body:
            continue
        value = body[name]
        expected = check(value)
        if expected is not None:
            shown = repr(value) if isinstance(value, str | int | float) else json_type(value)
            return f"{name} must be {expected}, got {json_type(value)} ({shown})"
    return None


def body_problem(body: Mapping[str, object]) -> str | None:
    """What `batchgate run` refuses in a chat body besides its model: messages that are not a
    non-empty list of objects with a role, or a field of the wrong type or range. The `Gateway`
    refuses the same before sending, with the same one-line reason (None: fine)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty list"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return f"messages[{i}] must be an object with a string role"
    return field_type_problem(body)
