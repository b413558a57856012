"""Request validation and header formats of both families, without a socket."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.emulator.anthropic_api import AnthropicFamily, count_input
from batchgate.emulator.config import ProviderConfig
from batchgate.emulator.limiter import DimensionState
from batchgate.emulator.openai_api import OpenAIFamily
from batchgate.emulator.wire import ApiError, go_duration, retry_hint_headers, rfc3339
from batchgate.tokens import ExactTokenCounter

OPENAI = ProviderConfig("alpha", "openai", default_max_tokens=100)
ANTHROPIC = ProviderConfig("gamma", "anthropic")
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def openai_family() -> OpenAIFamily:
    return OpenAIFamily()


def _openai_error(family: OpenAIFamily, body: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        family.parse(body, OPENAI)
    return info.value


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"messages": USER}, None, None),
        ({"model": 5, "messages": USER}, "model", "invalid_type"),
        ({"model": "m"}, "messages", "missing_required_parameter"),
        ({"model": "m", "messages": "hi"}, "messages", "invalid_type"),
        ({"model": "m", "messages": []}, "messages", "empty_array"),
        ({"model": "m", "messages": ["hi"]}, "messages[0]", "invalid_type"),
        ({"model": "m", "messages": [{"content": "x"}]}, "messages[0].role", "missing_required_parameter"),
        ({"model": "m", "messages": [{"role": "bot", "content": "x"}]}, "messages[0].role", "invalid_value"),
        ({"model": "m", "messages": [{"role": "user"}]}, "messages[0].content", "missing_required_parameter"),
        ({"model": "m", "messages": USER, "max_tokens": -5}, "max_tokens", "integer_below_min_value"),
        ({"model": "m", "messages": USER, "max_tokens": "10"}, "max_tokens", "invalid_type"),
        ({"model": "m", "messages": USER, "max_tokens": 1.5}, "max_tokens", "invalid_type"),
        ({"model": "m", "messages": USER, "n": 0}, "n", "integer_below_min_value"),
        ({"model": "m", "messages": USER, "temperature": 3}, "temperature", "decimal_out_of_range"),
        ([1, 2], "body", "invalid_type"),
    ],
)
def test_openai_validation_matches_the_real_codes(
    openai_family: OpenAIFamily, body: Any, param: str | None, code: str | None
) -> None:
    err = _openai_error(openai_family, body)
    assert (err.status, err.etype, err.param, err.code) == (400, "invalid_request_error", param, code)


def test_openai_charges_prompt_plus_max_tokens_times_n(openai_family: OpenAIFamily) -> None:
    body = {"model": "m", "messages": USER, "max_tokens": 20, "n": 3}
    req = openai_family.parse(body, OPENAI)
    prompt = ExactTokenCounter().count_prompt(body)
    assert req.prompt_tokens == prompt
    assert req.cost.tokens == prompt + 60
    default = openai_family.parse({"model": "m", "messages": USER}, OPENAI)
    assert default.cost.tokens == prompt + 100  # default_max_tokens


def test_openai_unknown_model_is_404_model_not_found(openai_family: OpenAIFamily) -> None:
    cfg = ProviderConfig("alpha", "openai", models=("small",))
    with pytest.raises(ApiError) as info:
        openai_family.parse({"model": "big", "messages": USER}, cfg)
    assert (info.value.status, info.value.code) == (404, "model_not_found")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"max_tokens": 5, "messages": USER}, "model: Field required"),
        ({"model": "c", "messages": USER}, "max_tokens: Field required"),
        ({"model": "c", "max_tokens": -1, "messages": USER}, "greater than or equal to 1"),
        ({"model": "c", "max_tokens": "5", "messages": USER}, "valid integer"),
        ({"model": "c", "max_tokens": 5}, "messages: Field required"),
        ({"model": "c", "max_tokens": 5, "messages": []}, "at least one message"),
        (
            {"model": "c", "max_tokens": 5, "messages": [{"role": "assistant", "content": "x"}]},
            "first message",
        ),
        (
            {"model": "c", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]},
            "'user' or 'assistant'",
        ),
        ({"model": "c", "max_tokens": 5, "messages": [*USER, *USER]}, "must alternate"),
        ({"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": ""}]}, "non-empty content"),
    ],
)
def test_anthropic_validation(body: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ApiError) as info:
        AnthropicFamily().parse(body, ANTHROPIC)
    assert (info.value.status, info.value.etype) == (400, "invalid_request_error")
    assert fragment in info.value.message


def test_anthropic_requires_the_version_header_and_checks_the_key() -> None:
    family = AnthropicFamily()
    family.authenticate({"anthropic-version": "2023-06-01"}, None)
    with pytest.raises(ApiError) as missing_version:
        family.authenticate({}, None)
    assert missing_version.value.status == 400
    with pytest.raises(ApiError) as bad_key:
        family.authenticate({"x-api-key": "wrong", "anthropic-version": "2023-06-01"}, "right")
    assert (bad_key.value.status, bad_key.value.etype) == (401, "authentication_error")


def test_anthropic_counts_its_own_input_tokens_and_charges_max_tokens() -> None:
    body = {
        "model": "c",
        "max_tokens": 40,
        "system": "abcdefg",
        "messages": [{"role": "user", "content": "x" * 35}],
    }
    assert count_input(body) == 12 + 6  # ceil(42 bytes / 3.5) + 3 per message incl. the system prompt
    req = AnthropicFamily().parse(body, ANTHROPIC)
    assert (req.cost.input_tokens, req.cost.output_tokens, req.cost.tokens) == (18, 40, 58)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.012, "12ms"), (1, "1s"), (1.5, "1.5s"), (360, "6m0s"), (85656.648, "23h47m36.648s")],
)
def test_go_durations(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_retry_hints_round_up() -> None:
    assert retry_hint_headers(0.0004) == {"retry-after-ms": "1", "retry-after": "1"}
    assert retry_hint_headers(2.0001) == {"retry-after-ms": "2001", "retry-after": "3"}


def test_ratelimit_headers_of_both_families(openai_family: OpenAIFamily) -> None:
    states = (DimensionState("requests", 600, 540, 0.1), DimensionState("tokens", 10_000, 0, 6.0))
    headers = openai_family.ratelimit_headers(states, 0.0)
    assert headers["x-ratelimit-limit-requests"] == "600"
    assert headers["x-ratelimit-remaining-tokens"] == "0"
    assert headers["x-ratelimit-reset-requests"] == "100ms"
    anthropic = AnthropicFamily().ratelimit_headers(
        (DimensionState("input_tokens", 1000, 10, 1.0), DimensionState("output_tokens", 500, 5, 2.0)), 0.0
    )
    assert anthropic["anthropic-ratelimit-input-tokens-reset"] == rfc3339(1.0) == "1970-01-01T00:00:01Z"
    assert anthropic["anthropic-ratelimit-tokens-remaining"] == "5"  # the most restrictive
