"""A LangChain `Runnable` over a batchgate `Gateway` (extra: `pip install batchgate[langchain]`).

    async with Gateway(config) as gw:
        llm = GatewayRunnable(gw, model="gpt-4o-mini", max_tokens=64)
        messages = await llm.abatch(["Classify: I love it", "Classify: it broke"])

Inputs may be prompt strings, LangChain messages (or lists of them), or OpenAI chat bodies.
Outputs are `AIMessage`s carrying the provider, attempts and usage in their metadata. A failed
item raises its batchgate error, or is returned as the exception with `return_exceptions=True`,
as LangChain's own `batch` does. The gateway does the pacing, so `max_concurrency` is not needed.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from batchgate.errors import BatchgateError
from batchgate.gateway import Gateway
from batchgate.models import ChatBody, Result

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def to_body(value: object, *, model: str, max_tokens: int | None) -> ChatBody:
    """An OpenAI chat body from a prompt string, a message or messages, or a body."""
    if isinstance(value, dict):
        body: ChatBody = dict(value)
        body.setdefault("model", model)
    else:
        if isinstance(value, str):
            messages: list[dict[str, object]] = [{"role": "user", "content": value}]
        elif isinstance(value, BaseMessage):
            messages = [_message(value)]
        elif isinstance(value, Sequence):
            messages = [_message(m) for m in value]
        else:
            raise TypeError(f"cannot turn {type(value).__name__} into a chat request")
        body = {"model": model, "messages": messages}
    if max_tokens is not None:
        body.setdefault("max_tokens", max_tokens)
    return body


def _message(message: object) -> dict[str, object]:
    if isinstance(message, BaseMessage):
        return {"role": _ROLES.get(message.type, message.type), "content": message.content}
    if isinstance(message, tuple) and len(message) == 2:
        role, content = message
        return {"role": _ROLES.get(role, role), "content": content}
    raise TypeError(f"cannot turn {type(message).__name__} into a chat message")


def to_message(result: Result) -> AIMessage:
    usage = result.usage
    return AIMessage(
        content=result.text or "",
        response_metadata={
            "provider": result.provider,
            "model_name": result.model,
            "attempts": len(result.attempts),
            "latency_ms": result.latency_ms,
            "request_id": result.request_id,
        },
        usage_metadata={
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        }
        if usage is not None
        else None,
    )


class GatewayRunnable(Runnable[object, AIMessage]):
    """Chat requests through a started `Gateway` (async) or its config (sync `batch`)."""

    def __init__(self, gateway: Gateway, *, model: str, max_tokens: int | None = None) -> None:
        self.gateway = gateway
        self.model = model
        self.max_tokens = max_tokens

    def _body(self, value: object) -> ChatBody:
        return to_body(value, model=self.model, max_tokens=self.max_tokens)

    @staticmethod
    def _outcome(result: Result, return_exceptions: bool) -> AIMessage | Exception:
        if result.ok:
            return to_message(result)
        error = result.error or BatchgateError("the request failed")
        if return_exceptions:
            return error
        raise error

    def invoke(self, input: object, config: RunnableConfig | None = None, **kwargs: object) -> AIMessage:
        out = self.batch([input])[0]
        assert isinstance(out, AIMessage)
        return out

    async def ainvoke(
        self, input: object, config: RunnableConfig | None = None, **kwargs: object
    ) -> AIMessage:
        result = await self.gateway.arun(self._body(input))
        out = self._outcome(result, return_exceptions=False)
        assert isinstance(out, AIMessage)
        return out

    def batch(  # type: ignore[override]
        self,
        inputs: list[object],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: object,
    ) -> list[AIMessage | Exception]:
        results = self.gateway.batch([self._body(i) for i in inputs])
        return [self._outcome(r, return_exceptions) for r in results]

    async def abatch(  # type: ignore[override]
        self,
        inputs: list[object],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: object,
    ) -> list[AIMessage | Exception]:
        results = await self.gateway.abatch([self._body(i) for i in inputs])
        return [self._outcome(r, return_exceptions) for r in results]
