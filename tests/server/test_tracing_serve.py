"""`batchgate serve --trace` (a subprocess) exporting to a real OTLP/HTTP receiver on loopback
(`tests/otlp.py`): a live request that carries a W3C `traceparent` gets its span in the client's
trace, as a child of the client's span; one without starts a trace of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai.types.chat import ChatCompletionMessageParam

from batchgate.emulator import EmulatorThread
from otlp import Receiver, otlp_receiver
from waiting import wait_for

from .harness import ALPHA, Server, client, gateway_config, running

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hi"}]
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def traced(tmp_path: Path, fresh_emu: EmulatorThread) -> Iterator[tuple[Server, Receiver]]:
    with otlp_receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        config = gateway_config(tmp_path / "gateway.yaml", fresh_emu)
        with running(tmp_path, config, "--trace", env=env) as server:
            yield server, receiver


def test_a_live_request_joins_the_clients_trace(traced: tuple[Server, Receiver]) -> None:
    server, receiver = traced
    c = client(server, server.keys_create())
    try:
        parent = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}
        answer = c.chat.completions.create(model=ALPHA, messages=HELLO, max_tokens=5, extra_headers=parent)
        c.chat.completions.create(model=ALPHA, messages=HELLO, max_tokens=5)
    finally:
        c.close()
    assert answer.usage is not None
    name = f"chat {ALPHA}"
    wait_for(lambda: len(receiver.named(name)) == 2, "both requests' spans exported")
    joined, own = sorted(receiver.named(name), key=lambda s: s.trace_id != CLIENT_TRACE)
    assert joined.trace_id == CLIENT_TRACE
    assert joined.parent_span_id == CLIENT_SPAN
    assert joined.attributes["batchgate.target"] == "alpha"
    assert joined.attributes["gen_ai.usage.output_tokens"] == answer.usage.completion_tokens
    assert own.trace_id != CLIENT_TRACE
    assert own.parent_span_id == ""
