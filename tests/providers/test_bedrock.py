"""`kind: bedrock` over real sockets: batchgate's client signs with SigV4 (botocore, the standard
credential chain read from the environment), reaches the emulated Converse and ConverseStream
endpoints, and turns Bedrock's error types into the rate, overload, model and key paths; the
emulator checks each signature and answers as Bedrock does, which boto3 itself parses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import boto3
import botocore.config
import botocore.exceptions
import orjson
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from awsutil import aws_only
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.config.bedrock import BedrockSettings
from batchgate.emulator import Emulator, EmulatorThread, emulator_config_from_dict
from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    MalformedResponse,
    ModelRefusedError,
    OverloadedError,
    ProviderError,
    RateLimitError,
)
from batchgate.providers import make_chat_client
from batchgate.providers.bedrock_auth import url_region
from batchgate.providers.http import SessionTransport, create_session

pytestmark = pytest.mark.integration

KEY_ID = "AKIDBEDROCKTEST01"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
TIMEOUTS = TimeoutConfig(connect=2.0, total=10.0)
BODY = {
    "messages": [{"role": "user", "content": "Classify the sentiment: I loved it, wonderful"}],
    "max_tokens": 9,
}
TOOL = {"type": "function", "function": {"name": "label", "parameters": {"type": "object"}}}


@pytest.fixture(autouse=True)
def aws_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The credential chain sees these keys only (no files of the machine, no instance role)."""
    aws_only(monkeypatch, KEY_ID, SECRET)


def _config(**provider: Any) -> Any:
    entry = {"name": "br", "family": "bedrock", "api_key": f"{KEY_ID}:{SECRET}", "limits": {"rpm": 10**6}}
    return emulator_config_from_dict({"seed": 1, "providers": [{**entry, **provider}]})


def _client(emu: Emulator, http: aiohttp.ClientSession, *, stream: bool = False) -> Any:
    settings = BedrockSettings(region="us-east-1", stream=stream)
    provider = ProviderConfig(name="br", kind="bedrock", base_url="https://unused", bedrock=settings)
    return make_chat_client(provider, SessionTransport(http), TIMEOUTS, base_url=emu.base_url("br"))


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse-stream"])
async def test_a_signed_request_is_answered_as_a_chat_completion(stream: bool) -> None:
    async with Emulator(_config()) as emu, create_session(connect_timeout=2.0) as http:
        answer = await _client(emu, http, stream=stream).send(dict(BODY), model=MODEL)
        assert answer.body["object"] == "chat.completion"
        assert answer.body["model"] == MODEL
        assert answer.body["choices"][0]["message"]["content"] == "positive"
        assert answer.body["choices"][0]["finish_reason"] == "stop"
        assert answer.usage.prompt_tokens > 0
        assert answer.usage.completion_tokens == 3  # "positive": ceil(8 bytes / 3.5)
        assert answer.request_id == answer.body["id"]
        stats = emu.stats()["providers"]["br"]
        assert stats["completed"] == 1
        assert stats["rejected"]["auth"] == 0


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse-stream"])
async def test_a_forced_tool_comes_back_as_a_tool_call(stream: bool) -> None:
    async with Emulator(_config()) as emu, create_session(connect_timeout=2.0) as http:
        body = {**BODY, "max_tokens": 50, "tools": [TOOL], "tool_choice": "required"}
        answer = await _client(emu, http, stream=stream).send(body, model=MODEL)
        choice = answer.body["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        assert choice["message"]["tool_calls"][0]["function"] == {
            "name": "label",
            "arguments": '{"answer":"positive"}',
        }


async def _error(
    emu: Emulator, http: aiohttp.ClientSession, model: str = MODEL, **body: Any
) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await _client(emu, http).send({**BODY, **body}, model=model)
    return caught.value


async def test_throttling_is_the_rate_path_and_unavailable_the_overload_path() -> None:
    async with Emulator(_config(limits={"rpm": 1})) as emu, create_session(connect_timeout=2.0) as http:
        await _client(emu, http).send(dict(BODY), model=MODEL)
        throttled = await _error(emu, http)
        assert type(throttled) is RateLimitError
        assert throttled.status == 429
        assert "ThrottlingException" in str(throttled)
    async with (
        Emulator(_config(faults={"overloaded": 1.0})) as emu,
        create_session(connect_timeout=2.0) as http,
    ):
        overloaded = await _error(emu, http)
        assert type(overloaded) is OverloadedError
        assert "ServiceUnavailableException" in str(overloaded)


async def test_a_model_not_served_is_refused_alone_and_a_bad_body_is_a_bad_request() -> None:
    async with Emulator(_config(models=[MODEL])) as emu, create_session(connect_timeout=2.0) as http:
        refused = await _error(emu, http, model="amazon.nova-micro-v1:0")
        assert type(refused) is ModelRefusedError
        assert "ResourceNotFoundException" in str(refused)
        unsupported = await _error(emu, http, seed=3)  # refused before sending
        assert type(unsupported) is BadRequestError
        assert "seed" in str(unsupported)
        assert emu.stats()["providers"]["br"]["admitted"] == 0


async def test_a_wrong_secret_is_an_authentication_error_and_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    async with Emulator(_config()) as emu, create_session(connect_timeout=2.0) as http:
        wrong = await _error(emu, http)
        assert type(wrong) is AuthenticationError
        assert "InvalidSignatureException" in str(wrong)
        assert "not-the-secret" not in str(wrong)
        assert emu.stats()["providers"]["br"]["rejected"]["auth"] == 1


def _signed(url: str, body: bytes, secret: str = SECRET) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(KEY_ID, secret), "bedrock", "us-east-1").add_auth(request)
    return dict(request.headers.items())


@pytest.mark.parametrize(
    ("headers", "error_type"),
    [
        ({}, "MissingAuthenticationTokenException"),
        ({"Authorization": "Bearer abc"}, "IncompleteSignatureException"),
    ],
)
async def test_an_unsigned_request_is_refused_as_aws_does(headers: dict[str, str], error_type: str) -> None:
    async with Emulator(_config()) as emu, aiohttp.ClientSession() as http:
        url = f"{emu.base_url('br')}/model/m/converse"
        async with http.post(url, data=b"{}", headers=headers) as answer:
            assert answer.status == 403
            assert answer.headers["x-amzn-ErrorType"].startswith(error_type + ":")
            assert "message" in await answer.json()


async def test_refuse_unknown_fields_names_the_field() -> None:
    async with Emulator(_config(refuse_unknown_fields=True)) as emu, aiohttp.ClientSession() as http:
        url = f"{emu.base_url('br')}/model/m/converse"
        body = b'{"messages": [{"role": "user", "content": [{"text": "hi"}]}], "temperature": 0.5}'
        async with http.post(url, data=body, headers=_signed(url, body)) as answer:
            assert answer.status == 400
            assert answer.headers["x-amzn-ErrorType"].startswith("ValidationException:")
            assert "temperature" in (await answer.json())["message"]


def test_the_region_comes_from_the_entry_then_the_url_then_the_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    assert url_region("https://bedrock-runtime.eu-west-3.amazonaws.com") == "eu-west-3"
    assert url_region("http://127.0.0.1:8000/br") is None

    def region(base_url: str, settings: BedrockSettings | None = None) -> str:
        provider = ProviderConfig(name="br", kind="bedrock", base_url=base_url, bedrock=settings)
        return str(make_chat_client(provider, SessionTransport(None), TIMEOUTS)._signer.region)  # type: ignore[attr-defined, arg-type]

    url = "https://bedrock-runtime.eu-west-3.amazonaws.com"
    assert region(url, BedrockSettings(region="us-west-2")) == "us-west-2"
    assert region(url) == "eu-west-3"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert region("http://127.0.0.1:1") == "ap-south-1"
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ConfigError, match=r"providers\.br\.region: no AWS region"):
        region("http://127.0.0.1:1")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    with pytest.raises(ConfigError, match="no AWS credentials found"):
        region(url)


# -- boto3 parses every answer -------------------------------------------------------------------


@pytest.fixture
def served() -> Iterator[EmulatorThread]:
    emu = EmulatorThread(_config(models=[MODEL, "refused.model"], refused_models=["refused.model"]))
    emu.start()
    yield emu
    emu.stop()


def _boto3(emu: EmulatorThread, secret: str = SECRET) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=emu.base_url("br"),
        region_name="us-east-1",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=secret,
        config=botocore.config.Config(retries={"total_max_attempts": 1}),
    )


def _code(call: Any) -> str:
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        call()
    return str(caught.value.response["Error"]["Code"])


def test_boto3_parses_converse_converse_stream_and_every_error(served: EmulatorThread) -> None:
    client = _boto3(served)
    messages = [{"role": "user", "content": [{"text": "Classify the sentiment: I loved it, wonderful"}]}]
    answer = client.converse(modelId=MODEL, messages=messages, inferenceConfig={"maxTokens": 20})
    assert answer["output"]["message"]["content"] == [{"text": "positive"}]
    assert answer["stopReason"] == "end_turn"
    assert answer["usage"]["outputTokens"] == 3
    assert answer["ResponseMetadata"]["RequestId"]
    tools = {
        "tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}],
        "toolChoice": {"any": {}},
    }
    streamed = client.converse_stream(modelId=MODEL, messages=messages, toolConfig=tools)
    events = list(streamed["stream"])
    assert events[0] == {"messageStart": {"role": "assistant"}}
    assert events[1]["contentBlockStart"]["start"]["toolUse"]["name"] == "f"
    assert events[-2] == {"messageStop": {"stopReason": "tool_use"}}
    assert events[-1]["metadata"]["usage"]["totalTokens"] > 0
    assert _code(lambda: client.converse(modelId="other", messages=messages)) == "ResourceNotFoundException"
    assert (
        _code(lambda: client.converse(modelId="refused.model", messages=messages)) == "AccessDeniedException"
    )
    assistant_first = [{"role": "assistant", "content": [{"text": "hi"}]}]
    assert _code(lambda: client.converse(modelId=MODEL, messages=assistant_first)) == "ValidationException"
    wrong = _boto3(served, secret="wrong")
    assert _code(lambda: wrong.converse(modelId=MODEL, messages=messages)) == "InvalidSignatureException"


@pytest.mark.parametrize(
    ("provider", "error_type"),
    [
        ({"limits": {"rpm": 1}}, "ThrottlingException"),
        ({"faults": {"overloaded": 1.0}}, "ServiceUnavailableException"),
    ],
)
def test_boto3_parses_throttling_and_overload(provider: dict[str, Any], error_type: str) -> None:
    emu = EmulatorThread(_config(**provider))
    emu.start()
    try:
        client = _boto3(emu)
        messages = [{"role": "user", "content": [{"text": "hi"}]}]
        if "limits" in provider:
            client.converse(modelId=MODEL, messages=messages)  # the one request of the minute
        assert _code(lambda: client.converse(modelId=MODEL, messages=messages)) == error_type
    finally:
        emu.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse-stream"])
async def test_a_garbled_answer_is_a_malformed_response(stream: bool) -> None:
    async with (
        Emulator(_config(faults={"truncated": 1.0})) as emu,
        create_session(connect_timeout=2.0) as http,
    ):
        with pytest.raises(MalformedResponse):
            await _client(emu, http, stream=stream).send(dict(BODY), model=MODEL)


async def test_a_model_whose_access_is_not_granted_is_refused_alone() -> None:
    other = "amazon.nova-micro-v1:0"
    async with Emulator(_config(refused_models=[other])) as emu, create_session(connect_timeout=2.0) as http:
        refused = await _error(emu, http, model=other)
        assert type(refused) is ModelRefusedError
        assert refused.status == 403
        assert "AccessDeniedException" in str(refused)
        answer = await _client(emu, http).send(dict(BODY), model=MODEL)  # the key's other models serve
        assert answer.body["choices"][0]["message"]["content"] == "positive"
        assert emu.stats()["providers"]["br"]["rejected"]["model_refused"] == 1


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse-stream"])
async def test_a_json_schema_format_comes_back_as_json_content(stream: bool) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}}
    async with Emulator(_config()) as emu, create_session(connect_timeout=2.0) as http:
        body = {**BODY, "max_tokens": 50, "response_format": fmt}
        answer = await _client(emu, http, stream=stream).send(body, model=MODEL)
        choice = answer.body["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert "tool_calls" not in choice["message"]
        assert orjson.loads(choice["message"]["content"]) == {"answer": "positive"}
