"""The OpenAI Chat Completions wire format: request validation with the real API's messages and
codes, response and error bodies, and the `x-ratelimit-*` headers (Go-style reset durations).

Charged at admission: prompt tokens (counted exactly, as OpenAI does) + max_tokens × n; without
max_tokens the provider's `default_max_tokens` is charged.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.emulator.config import ProviderConfig
from batchgate.emulator.content import last_user_text
from batchgate.emulator.limiter import DimensionState, RequestCost
from batchgate.emulator.model_access import refusal
from batchgate.emulator.wire import ApiError, Family, ParsedRequest, go_duration
from batchgate.tokens import ExactTokenCounter

ROLES = ("system", "assistant", "user", "function", "tool", "developer")
MAX_N = 128
_HEADER_NAMES = {"requests": "requests", "tokens": "tokens"}
_DIM_WORDS = {"requests": ("requests", "RPM"), "tokens": ("tokens", "TPM")}
_BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
    "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
)
_NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header using "
    "Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)
_BAD_KEY = (
    "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
)
_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more information "
    "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)


def json_type(value: Any) -> str:
    """The JSON type of a value, with its article, as OpenAI's messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _invalid(message: str, param: str | None, code: str | None) -> ApiError:
    return ApiError(400, "invalid_request_error", message, param=param, code=code)


def body_model(body: Any) -> str:
    """The model a body names, refused as OpenAI refuses a body that is not an object or names none."""
    if not isinstance(body, dict):
        raise _wrong_type("body", "an object", body)
    model = body.get("model")
    if model is None:
        raise _invalid("you must provide a model parameter", None, None)
    if not isinstance(model, str):
        raise _wrong_type("model", "a string", model)
    return model


def _wrong_type(param: str, expected: str, value: Any) -> ApiError:
    return _invalid(
        f"Invalid type for '{param}': expected {expected}, but got {json_type(value)} instead.",
        param,
        "invalid_type",
    )


def _int_param(body: Mapping[str, Any], name: str, minimum: int, maximum: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong_type(name, "an integer", value)
    if value < minimum:
        raise _invalid(
            f"Invalid '{name}': integer below minimum value. Expected a value >= {minimum}, "
            f"but got {value} instead.",
            name,
            "integer_below_min_value",
        )
    if maximum is not None and value > maximum:
        raise _invalid(
            f"Invalid '{name}': integer above maximum value. Expected a value <= {maximum}, "
            f"but got {value} instead.",
            name,
            "integer_above_max_value",
        )
    return value


class _CachingCounter(ExactTokenCounter):
    """The exact counter, remembering short texts (roles, labels) that recur in every request."""

    def __init__(self) -> None:
        super().__init__()
        self._count = functools.lru_cache(maxsize=4096)(super().count_text)

    def count_text(self, text: str) -> int:
        return self._count(text) if len(text) <= 64 else super().count_text(text)


class OpenAIFamily(Family):
    name = "openai"
    path = "/v1/chat/completions"
    request_id_header = "x-request-id"
    id_prefix = "chatcmpl-"

    def __init__(self, counter: ExactTokenCounter | None = None) -> None:
        self._counter = counter

    @property
    def counter(self) -> ExactTokenCounter:
        """The exact counter (its encoding is loaded on the first count, or by `load()`)."""
        if self._counter is None:
            self._counter = _CachingCounter()
        return self._counter

    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> None:
        if api_key is None:
            return
        auth = headers.get("Authorization", "")
        if not auth:
            raise ApiError(401, "invalid_request_error", _NO_KEY, reason="auth")
        if auth != f"Bearer {api_key}":
            raise ApiError(401, "invalid_request_error", _BAD_KEY, code="invalid_api_key", reason="auth")

    def parse(self, body: Any, provider: ProviderConfig) -> ParsedRequest:
        model = body_model(body)
        messages = body.get("messages")
        if messages is None:
            raise _invalid(
                "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
            )
        if not isinstance(messages, list):
            raise _wrong_type("messages", "an array of objects", messages)
        if not messages:
            raise _invalid(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead.",
                "messages",
                "empty_array",
            )
        for i, message in enumerate(messages):
            self._check_message(message, f"messages[{i}]")
        max_tokens = _int_param(body, "max_completion_tokens", 1)
        if max_tokens is None:
            max_tokens = _int_param(body, "max_tokens", 1)
        n = _int_param(body, "n", 1, MAX_N) or 1
        temperature = body.get("temperature")
        if temperature is not None:
            if isinstance(temperature, bool) or not isinstance(temperature, int | float):
                raise _wrong_type("temperature", "a number", temperature)
            if not 0 <= temperature <= 2:
                raise _invalid(
                    f"Invalid 'temperature': decimal out of range. Expected a value between 0 and 2, "
                    f"but got {temperature} instead.",
                    "temperature",
                    "decimal_out_of_range",
                )
        if provider.models is not None and model not in provider.models:
            raise self.unknown_model(model)
        self.check_access(provider, model)
        charged_max = max_tokens if max_tokens is not None else provider.default_max_tokens
        prompt_tokens = self.counter.count_prompt(body)
        prompt = last_user_text(messages)
        output = charged_max * n
        return ParsedRequest(
            model=model,
            prompt=prompt,
            max_tokens=charged_max,
            n=n,
            prompt_tokens=prompt_tokens,
            cost=RequestCost(tokens=prompt_tokens + output, input_tokens=prompt_tokens, output_tokens=output),
            fingerprint=hash(prompt),
        )

    @staticmethod
    def _check_message(message: Any, where: str) -> None:
        if not isinstance(message, dict):
            raise _wrong_type(where, "an object", message)
        role = message.get("role")
        if role is None:
            raise _invalid(
                f"Missing required parameter: '{where}.role'.", f"{where}.role", "missing_required_parameter"
            )
        if role not in ROLES:
            supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
            raise _invalid(
                f"Invalid value: '{role}'. Supported values are: {supported}.",
                f"{where}.role",
                "invalid_value",
            )
        content = message.get("content")
        if content is None:
            if role in ("user", "system", "developer", "tool"):
                raise _invalid(
                    f"Missing required parameter: '{where}.content'.",
                    f"{where}.content",
                    "missing_required_parameter",
                )
        elif not isinstance(content, str | list):
            raise _wrong_type(f"{where}.content", "one of a string or array of objects", content)

    def count_text(self, text: str) -> int:
        return self.counter.count_text(text) if text else 0

    def success_body(
        self, req: ParsedRequest, text: str, tokens: int, cut: bool, body_id: str, wall: float
    ) -> bytes:
        finish = "length" if cut else "stop"
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish,
            }
            for i in range(req.n)
        ]
        completion = tokens * req.n
        return orjson.dumps(
            {
                "id": body_id,
                "object": "chat.completion",
                "created": int(wall),
                "model": req.model,
                "choices": choices,
                "usage": {
                    "prompt_tokens": req.prompt_tokens,
                    "completion_tokens": completion,
                    "total_tokens": req.prompt_tokens + completion,
                    "prompt_tokens_details": {"cached_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": 0},
                },
                "system_fingerprint": "fp_batchgate_emulator",
            }
        )

    def error_body(self, err: ApiError, rid: str) -> bytes:
        return orjson.dumps(
            {"error": {"message": err.message, "type": err.etype, "param": err.param, "code": err.code}}
        )

    def ratelimit_headers(self, states: tuple[DimensionState, ...], wall: float) -> dict[str, str]:
        headers: dict[str, str] = {}
        for s in states:
            name = _HEADER_NAMES.get(s.dimension)
            if name is None:
                continue
            headers[f"x-ratelimit-limit-{name}"] = str(s.limit)
            headers[f"x-ratelimit-remaining-{name}"] = str(s.remaining)
            headers[f"x-ratelimit-reset-{name}"] = go_duration(s.seconds_until_full)
        return headers

    def not_found(self, method: str, path: str) -> ApiError:
        return ApiError(404, "invalid_request_error", f"Invalid URL ({method} {path})", reason="not_found")

    def bad_json(self) -> ApiError:
        return _invalid(_BAD_JSON, None, None)

    def too_large(self, limit: int) -> ApiError:
        return ApiError(
            413,
            "invalid_request_error",
            f"Request body too large: the limit is {limit} bytes.",
            code="request_too_large",
            reason="too_large",
        )

    def unknown_model(self, model: str) -> ApiError:
        return ApiError(
            404,
            "invalid_request_error",
            f"The model `{model}` does not exist or you do not have access to it.",
            code="model_not_found",
            reason="unknown_model",
        )

    def check_access(self, provider: ProviderConfig, model: str) -> None:
        """The 403 `model_not_found` of a key without access to `model` (`model_access`)."""
        message = refusal(provider.refused_models, model)
        if message is not None:
            raise ApiError(
                403, "invalid_request_error", message, code="model_not_found", reason="model_refused"
            )

    def never_fits(self, dimension: str, cost: int, limit: int) -> ApiError:
        words, abbr = _DIM_WORDS.get(dimension, (dimension, dimension))
        return ApiError(
            400,
            "invalid_request_error",
            f"Request too large on {words} per min ({abbr}): Limit {limit}, Requested {cost}. "
            "The input or output tokens must be reduced in order to run successfully.",
            code="request_too_large",
            reason="never_fits",
        )

    def rate_limited(self, dimension: str, limit: int) -> ApiError:
        words, abbr = _DIM_WORDS.get(dimension, (dimension, dimension))
        return ApiError(
            429,
            words,
            f"Rate limit reached on {words} per min ({abbr}): Limit {limit}. Please try again later.",
            code="rate_limit_exceeded",
            reason="rate_limit",
        )

    def concurrency_rejected(self) -> ApiError:
        return ApiError(
            503, "server_error", "The server is overloaded or not ready yet.", reason="concurrency"
        )

    def server_error(self, status: int) -> ApiError:
        message = {
            502: "Bad gateway.",
            503: "The server is overloaded or not ready yet.",
        }.get(status, "The server had an error while processing your request. Sorry about that!")
        return ApiError(status, "server_error", message, reason="fault")

    def overloaded(self) -> ApiError:
        return ApiError(
            503, "server_error", "The engine is currently overloaded, please try again later.", reason="fault"
        )

    def insufficient_quota(self) -> ApiError:
        return ApiError(429, "insufficient_quota", _QUOTA, code="insufficient_quota", reason="fault")
