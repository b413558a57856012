"""The emulator's Bedrock family on the wire: Converse's validation words, the event-stream frames
botocore's decoder reads, faults garbling a stream as they garble a body, and a provider without
credentials serving unsigned requests."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest
from botocore.eventstream import EventStreamBuffer

from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.emulator.event_stream import event, frame

pytestmark = pytest.mark.integration

USER = {"role": "user", "content": [{"text": "Classify: I loved it, wonderful"}]}


def test_a_frame_is_read_back_by_botocores_decoder() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(
        frame({":event-type": "messageStart", "x": "é"}, b'{"role":"assistant"}') + event("messageStop", {})
    )
    first, second = list(buffer)
    assert first.headers == {":event-type": "messageStart", "x": "é"}
    assert orjson.loads(first.payload) == {"role": "assistant"}
    assert second.headers[":event-type"] == "messageStop"


async def _post(emu: Emulator, body: Any, action: str = "converse") -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as http:
        url = f"{emu.url}/br/model/anthropic.claude-v2:1/{action}"
        async with http.post(
            url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
        ) as answer:
            return answer.status, dict(answer.headers), await answer.read()


def _emulator(**provider: Any) -> Emulator:
    entry = {"name": "br", "family": "bedrock", "limits": {"rpm": 10**6}, **provider}
    return Emulator(emulator_config_from_dict({"seed": 2, "providers": [entry]}))


async def test_without_credentials_an_unsigned_request_is_served_in_both_shapes() -> None:
    async with _emulator() as emu:
        status, headers, raw = await _post(emu, {"messages": [USER]})
        assert status == 200
        assert orjson.loads(raw)["output"]["message"]["content"] == [{"text": "positive"}]
        assert headers["x-amzn-RequestId"]
        status, headers, raw = await _post(emu, {"messages": [USER]}, "converse-stream")
        assert status == 200
        assert headers["Content-Type"] == "application/vnd.amazon.eventstream"
        buffer = EventStreamBuffer()
        buffer.add_data(raw)
        kinds = [m.headers[":event-type"] for m in buffer]
        assert kinds[0] == "messageStart"
        assert kinds[-2:] == ["messageStop", "metadata"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"messages": [{"role": "assistant", "content": [{"text": "hi"}]}]},
            "must start with a user message",
        ),
        ({"messages": [USER, USER]}, "must alternate between user and assistant"),
        (
            {
                "messages": [
                    USER,
                    {
                        "role": "assistant",
                        "content": [{"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}],
                    },
                ]
            },
            "toolConfig field must be defined",
        ),
        ({"messages": [USER], "inferenceConfig": {"maxTokens": 0}}, "positive integer"),
        (
            {"messages": [{"role": "user", "content": [{"text": "a", "image": {}}]}]},
            "exactly one known member",
        ),
        ({"messages": []}, "messages"),
    ],
)
async def test_converse_validation_answers_a_typed_400(body: dict[str, Any], words: str) -> None:
    async with _emulator() as emu:
        status, headers, raw = await _post(emu, body)
        assert status == 400
        assert headers["x-amzn-ErrorType"].startswith("ValidationException:")
        assert words in orjson.loads(raw)["message"]


@pytest.mark.parametrize("fault", ["truncated", "non_json"])
async def test_a_garbling_fault_garbles_the_stream_too(fault: str) -> None:
    async with _emulator(faults={fault: 1.0}) as emu:
        status, headers, raw = await _post(emu, {"messages": [USER]}, "converse-stream")
        assert status == 200
        assert headers["Content-Type"] != "application/vnd.amazon.eventstream"
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(raw)


def test_the_emulator_config_reads_family_bedrock_and_refuse_unknown_fields() -> None:
    entry = {"name": "br", "family": "bedrock", "refuse_unknown_fields": True}
    provider = emulator_config_from_dict({"providers": [entry]}).providers[0]
    assert (provider.family, provider.refuse_unknown_fields) == ("bedrock", True)
    assert (
        emulator_config_from_dict({"providers": [{"name": "o", "family": "openai"}]})
        .providers[0]
        .refuse_unknown_fields
        is False
    )
