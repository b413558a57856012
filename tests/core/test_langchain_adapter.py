"""The LangChain Runnable adapter drives the gateway against the emulator over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from batchgate.errors import QuotaExhaustedError
from batchgate.gateway import Gateway
from batchgate.integrations.langchain import GatewayRunnable, to_body

from .conftest import emu_provider, gateway_config

pytestmark = pytest.mark.integration


def test_inputs_become_chat_bodies() -> None:
    assert to_body("hi", model="m", max_tokens=5) == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 5,
    }
    body = to_body([SystemMessage("be brief"), HumanMessage("hi")], model="m", max_tokens=None)
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert to_body({"messages": []}, model="m", max_tokens=None)["model"] == "m"
    with pytest.raises(TypeError):
        to_body(42, model="m", max_tokens=None)


async def test_abatch_returns_ai_messages(emulator: Callable[..., Any]) -> None:
    providers = [emu_provider("alpha"), emu_provider("gamma", "anthropic")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha", "gamma"]}])
    async with Gateway(cfg) as gw:
        llm = GatewayRunnable(gw, model="m", max_tokens=16)
        out = await llm.abatch(
            [f"Classify the sentiment of this review: terrible, it broke #{i}" for i in range(20)]
        )
    assert all(isinstance(m, AIMessage) for m in out)
    assert {m.content for m in out if isinstance(m, AIMessage)} == {"negative"}
    first = out[0]
    assert isinstance(first, AIMessage)
    assert first.response_metadata["provider"] in {"alpha", "gamma"}
    assert first.usage_metadata is not None
    assert first.usage_metadata["input_tokens"] > 0


async def test_failures_raise_or_are_returned(emulator: Callable[..., Any]) -> None:
    providers = [emu_provider("alpha", faults={"insufficient_quota": 1.0})]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    async with Gateway(cfg) as gw:
        llm = GatewayRunnable(gw, model="m")
        out = await llm.abatch(["hello"], return_exceptions=True)
        assert isinstance(out[0], QuotaExhaustedError)
        with pytest.raises(QuotaExhaustedError):
            await llm.ainvoke("hello")
