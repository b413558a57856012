"""AWS Bedrock Runtime's Converse wire: request validation, answers, and errors by type
(shared/PROTOCOLS.md "AWS Bedrock";
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).

- The model is the path's `{modelId}` (`/model/{modelId}/converse`, `bedrock_routes.py`); the
  body holds `messages` (required: alternating user/assistant from user, each a non-empty list of
  content blocks), `system`, `inferenceConfig{maxTokens, ...}` (maxTokens defaults to the
  provider's `default_max_tokens`), `toolConfig` (required when a message holds a `toolUse` or
  `toolResult` block, as Converse says), and the other fields of `ACCEPTED_FIELDS`; with
  `refuse_unknown_fields` any other top-level field is a 400 ValidationException naming it.
- Errors are `{"message": ...}` with the type in `x-amzn-ErrorType` (`Type:http://internal.
  amazon.com/coral/com.amazon.bedrock/`), statuses from the action's Errors section:
  ThrottlingException 429 ("Too many requests/tokens, please wait before trying again."),
  ServiceUnavailableException 503, InternalServerException 500, ValidationException 400,
  ResourceNotFoundException 404 (a model the provider does not serve), AccessDeniedException 403
  (one of its `refused_models`: access to that model not granted), ServiceQuotaExceededException
  400 (the `insufficient_quota` fault). No rate-limit headers are sent; the request id is
  `x-amzn-RequestId`.
- A forced tool (`toolChoice` `tool` or `any`) is answered with a `toolUse` block whose input is
  `{"answer": TEXT}`, stopReason `tool_use`.

Tokens are counted as the Anthropic family counts them (Claude's models are Bedrock's usual ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.emulator.anthropic_api import count_text
from batchgate.emulator.config import ProviderConfig
from batchgate.emulator.content import content_text
from batchgate.emulator.limiter import DimensionState, RequestCost
from batchgate.emulator.wire import ApiError, Family, ParsedRequest

ACCEPTED_FIELDS: frozenset[str] = frozenset(
    {
        "messages",
        "system",
        "inferenceConfig",
        "toolConfig",
        "guardrailConfig",
        "additionalModelRequestFields",
        "promptVariables",
        "additionalModelResponseFieldPaths",
        "requestMetadata",
        "performanceConfig",
    }
)
BLOCK_KEYS = frozenset(
    {
        "text",
        "image",
        "document",
        "video",
        "toolUse",
        "toolResult",
        "guardContent",
        "cachePoint",
        "reasoningContent",
    }
)
ERROR_NAMESPACE = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
TOKENS_PER_MESSAGE = 3
_TOOL_BLOCKS = ("toolUse", "toolResult")


def aws_error(status: int, error_type: str, message: str, reason: str = "invalid") -> ApiError:
    """An error answer: its type in `x-amzn-ErrorType` (the body says only the message)."""
    headers = {"x-amzn-ErrorType": error_type + ERROR_NAMESPACE}
    return ApiError(status, error_type, message, reason=reason, headers=headers)


def _invalid(message: str) -> ApiError:
    return aws_error(400, "ValidationException", message)


def forced_tool(tool_config: Any) -> str | None:
    """The tool a `toolConfig` forces (`tool`, or the first tool for `any`), else None."""
    if not isinstance(tool_config, Mapping):
        return None
    choice, tools = tool_config.get("toolChoice"), tool_config.get("tools")
    if not isinstance(choice, Mapping):
        return None
    if isinstance(choice.get("tool"), Mapping):
        return str(choice["tool"].get("name"))
    if "any" in choice and isinstance(tools, list) and tools:
        return str(tools[0].get("toolSpec", {}).get("name"))
    return None


class BedrockFamily(Family):
    name = "bedrock"
    path = "/model/{modelId}/converse"
    request_id_header = "x-amzn-RequestId"
    id_prefix = "tooluse_"

    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> None:
        """The signature itself is checked before (`bedrock_routes`, which has the body)."""

    def route_model(self, match_info: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        return match_info.get("model")

    def parse(self, body: Any, provider: ProviderConfig) -> ParsedRequest:
        if not isinstance(body, dict):
            raise _invalid("Malformed input request, please reformat your input and try again.")
        model = str(body.get("model"))  # the path's modelId (the server puts it in the body)
        if provider.refuse_unknown_fields:
            for name in body:
                if name != "model" and name not in ACCEPTED_FIELDS:
                    raise _invalid(f"Malformed input request: extraneous key [{name}] is not permitted")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _invalid("1 validation error detected: Value at 'messages' failed to satisfy constraint")
        _check_messages(messages, has_tools=isinstance(body.get("toolConfig"), Mapping))
        config = body.get("inferenceConfig") or {}
        max_tokens = config.get("maxTokens", provider.default_max_tokens) if isinstance(config, dict) else 0
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise _invalid(
                "The maximum tokens you requested must be a positive integer (inferenceConfig.maxTokens)."
            )
        if provider.models is not None and model not in provider.models:
            raise self.unknown_model(model)
        if model in provider.refused_models:  # model access not granted (`refused_models`)
            message = "You don't have access to the model with the specified model ID."
            raise aws_error(403, "AccessDeniedException", message, reason="model_refused")
        system = body.get("system") or []
        texts = [content_text(m.get("content")) for m in messages] + [content_text(system)]
        input_tokens = count_text(" ".join(texts)) + TOKENS_PER_MESSAGE * (len(messages) + bool(system))
        prompt = next((content_text(m["content"]) for m in reversed(messages) if m["role"] == "user"), "")
        tool = forced_tool(body.get("toolConfig"))
        return ParsedRequest(
            model=model,
            prompt=prompt,
            max_tokens=max_tokens,
            n=1,
            prompt_tokens=input_tokens,
            cost=RequestCost(
                tokens=input_tokens + max_tokens, input_tokens=input_tokens, output_tokens=max_tokens
            ),
            fingerprint=hash(prompt),
            inputs=() if tool is None else (tool,),  # the forced tool the answer calls
        )

    def count_text(self, text: str) -> int:
        return count_text(text)

    def success_body(
        self, req: ParsedRequest, text: str, tokens: int, cut: bool, body_id: str, wall: float
    ) -> bytes:
        block: dict[str, Any] = {"text": text}
        stop = "max_tokens" if cut else "end_turn"
        if req.inputs and not cut:
            block = {"toolUse": {"toolUseId": body_id, "name": req.inputs[0], "input": {"answer": text}}}
            stop = "tool_use"
        usage = {
            "inputTokens": req.prompt_tokens,
            "outputTokens": tokens,
            "totalTokens": req.prompt_tokens + tokens,
        }
        return orjson.dumps(
            {
                "output": {"message": {"role": "assistant", "content": [block]}},
                "stopReason": stop,
                "usage": usage,
                "metrics": {"latencyMs": 1},
            }
        )

    def error_body(self, err: ApiError, rid: str) -> bytes:
        return orjson.dumps({"message": err.message})

    def ratelimit_headers(self, states: tuple[DimensionState, ...], wall: float) -> dict[str, str]:
        return {}  # Bedrock sends none

    def not_found(self, method: str, path: str) -> ApiError:
        return aws_error(404, "UnknownOperationException", "Unknown operation", reason="not_found")

    def bad_json(self) -> ApiError:
        return aws_error(400, "SerializationException", "Unexpected character in the request body")

    def too_large(self, limit: int) -> ApiError:
        return aws_error(413, "ValidationException", "Input is too long for requested model.", "too_large")

    def unknown_model(self, model: str) -> ApiError:
        return aws_error(
            404,
            "ResourceNotFoundException",
            "Could not resolve the foundation model from the provided model identifier.",
            reason="unknown_model",
        )

    def never_fits(self, dimension: str, cost: int, limit: int) -> ApiError:
        return _invalid(f"This request needs {cost} {dimension}, more than the quota of {limit} per minute.")

    def rate_limited(self, dimension: str, limit: int) -> ApiError:
        what = "requests" if dimension == "requests" else "tokens"
        message = f"Too many {what}, please wait before trying again."
        return aws_error(429, "ThrottlingException", message, reason="rate_limit")

    def concurrency_rejected(self) -> ApiError:
        message = "Too many connections, please wait before trying again."
        return aws_error(503, "ServiceUnavailableException", message, reason="concurrency")

    def server_error(self, status: int) -> ApiError:
        if status == 503:
            return aws_error(503, "ServiceUnavailableException", "Service unavailable.", reason="fault")
        message = "The server encountered an error processing your request."
        return aws_error(status, "InternalServerException", message, reason="fault")

    def overloaded(self) -> ApiError:
        message = "Too many connections, please wait before trying again."
        return aws_error(503, "ServiceUnavailableException", message, reason="fault")

    def insufficient_quota(self) -> ApiError:
        message = "Your request exceeds the service quota for your account."
        return aws_error(400, "ServiceQuotaExceededException", message, reason="fault")


def _check_messages(messages: list[Any], *, has_tools: bool) -> None:
    previous = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise _invalid(f"messages.{i}: a message needs role 'user' or 'assistant'")
        role, content = message["role"], message.get("content")
        if i == 0 and role != "user":
            raise _invalid(
                "A conversation must start with a user message. "
                "Try again with a conversation that starts with a user message."
            )
        if role == previous:
            raise _invalid("A conversation must alternate between user and assistant roles.")
        previous = role
        if not isinstance(content, list) or not content:
            raise _invalid(f"messages.{i}.content: a non-empty list of content blocks is required")
        for block in content:
            if not isinstance(block, dict) or len(block) != 1 or next(iter(block)) not in BLOCK_KEYS:
                raise _invalid(f"messages.{i}.content: each content block holds exactly one known member")
            if not has_tools and next(iter(block)) in _TOOL_BLOCKS:
                raise _invalid(
                    "The toolConfig field must be defined when using toolUse and toolResult content blocks."
                )
