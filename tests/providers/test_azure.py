"""Azure OpenAI over real sockets: the official `openai` SDK's `AzureOpenAI` reads the emulated
Azure wire (chat and the Batch API), batchgate's `kind: azure` clients reach the same endpoints
by every URL form Azure publishes, the emulator answers as Azure does (api-version, api-key,
deployments), and a `base_url` with a query keeps it after the path."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import orjson
import pytest

from batchgate.clock import FakeClock
from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.endpoints import ENDPOINT_KEY
from batchgate.errors import AuthenticationError, ModelRefusedError, RateLimitError
from batchgate.providers import make_chat_client
from batchgate.providers.http import SessionTransport, create_session

pytestmark = pytest.mark.integration

KEY = "azure-key-0123456789"
VERSION = "2024-10-21"
TIMEOUTS = TimeoutConfig(connect=2.0, total=10.0)
PROMPT = "Classify the sentiment: I loved it, wonderful"
BODY = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 5}


def _emulator(**extra: Any) -> Emulator:
    az = {
        "name": "az",
        "family": "azure",
        "api_key": KEY,
        "models": ["dep"],
        "limits": {"rpm": 10**6, "tpm": 10**8},
    }
    oa = {"name": "oa", "family": "openai", "limits": {"rpm": 10**6}}
    config = emulator_config_from_dict({"seed": 1, "providers": [{**az, **extra}, oa]})
    return Emulator(config)


async def _send(emu: Emulator, http: aiohttp.ClientSession, base_url: str, **config: Any) -> dict[str, Any]:
    provider = ProviderConfig(name="az", kind="azure", base_url=base_url, api_key=Secret(KEY), **config)
    client = make_chat_client(provider, SessionTransport(http), TIMEOUTS)
    answer = await client.send(dict(BODY), model="dep")
    return answer.body


@pytest.mark.parametrize(
    ("path", "config"),
    [
        ("/openai/deployments/dep?api-version=" + VERSION, {}),  # the deployment URL, as published
        ("", {"deployment": "dep", "api_version": VERSION}),  # the resource
        ("/openai", {"api_version": VERSION}),  # no deployment: the model names it
        ("/openai/v1", {}),  # the v1 surface, no api-version
    ],
)
async def test_every_azure_url_form_reaches_the_deployment(path: str, config: dict[str, Any]) -> None:
    async with _emulator() as emu, create_session(connect_timeout=2.0) as http:
        body = await _send(emu, http, f"{emu.url}/az{path}", **config)
        assert body["object"] == "chat.completion"
        assert body["model"] == "dep"
        assert body["choices"][0]["message"]["content"] == "positive"
        assert emu.stats()["providers"]["az"]["completed"] == 1


async def test_a_base_url_query_stays_after_the_path() -> None:
    """Before: `/chat/completions` went after the query (`/oa/v1?tenant=t/chat/completions`): 404."""
    config = emulator_config_from_dict({"providers": [{"name": "oa", "family": "openai"}]})
    async with Emulator(config) as emu, create_session(connect_timeout=2.0) as http:
        provider = ProviderConfig(name="oa", kind="openai", base_url=emu.base_url("oa") + "?tenant=t")
        client = make_chat_client(provider, SessionTransport(http), TIMEOUTS)
        answer = await client.send({**BODY, "model": "gpt-x"}, model="gpt-x")
        assert answer.body["object"] == "chat.completion"
        assert emu.stats()["unrouted"] == 0


async def test_an_http_error_names_the_url_without_the_key() -> None:
    async with _emulator() as emu, create_session(connect_timeout=2.0) as http:
        url = f"{emu.url}/az/openai/deployments/nope?api-version={VERSION}&api-key={KEY}"
        with pytest.raises(ModelRefusedError) as info:  # that deployment only
            await _send(emu, http, url)
        message = str(info.value)
        assert "HTTP 404" in message
        assert "DeploymentNotFound" in message
        assert "/az/openai/deployments/nope/chat/completions?api-key=***&api-version=" in message
        assert KEY not in message


async def test_the_emulator_answers_as_azure_does() -> None:
    async with _emulator() as emu, aiohttp.ClientSession() as http:
        chat = f"{emu.url}/az/openai/deployments/dep/chat/completions"
        data = orjson.dumps({**BODY, "model": "ignored"})
        async with http.post(chat, data=data, headers={"api-key": KEY}) as r:  # no api-version
            assert (r.status, await r.json()) == (
                404,
                {"error": {"code": "404", "message": "Resource not found"}},
            )
        async with http.post(f"{chat}?api-version={VERSION}", data=data) as r:  # no key
            body = await r.json()
            assert (r.status, body["error"]["code"]) == (401, "401")
            assert "missing subscription key" in body["error"]["message"]
        async with http.post(f"{chat}?api-version={VERSION}", data=data, headers={"api-key": "wrong"}) as r:
            assert (r.status, (await r.json())["error"]["code"]) == (401, "401")
        async with http.post(f"{chat}?api-version={VERSION}", data=data, headers={"api-key": KEY}) as r:
            assert r.status == 200
            provider = ProviderConfig(name="az", kind="azure", base_url=emu.url)
            client = make_chat_client(provider, SessionTransport(http), TIMEOUTS)
            seen = client.rate_limits(r.headers, 0.0)  # what batchgate reads of Azure's headers
            assert seen.remaining_requests == int(r.headers["x-ratelimit-remaining-requests"])
            assert seen.remaining_tokens == int(r.headers["x-ratelimit-remaining-tokens"])
            assert (await r.json())["model"] == "dep"  # the path's deployment, not the body's model
            assert int(r.headers["x-ratelimit-remaining-requests"]) >= 0
            assert "x-ratelimit-limit-requests" not in r.headers


async def test_azure_429s_carry_retry_after_ms_and_are_rate_limits() -> None:
    async with _emulator(limits={"rpm": 1}) as emu, create_session(connect_timeout=2.0) as http:
        await _send(emu, http, f"{emu.url}/az", deployment="dep", api_version=VERSION)
        with pytest.raises(RateLimitError) as info:
            await _send(emu, http, f"{emu.url}/az", deployment="dep", api_version=VERSION)
        headers = info.value.headers
        assert int(headers["retry-after-ms"]) > 0
        assert int(headers["retry-after"]) >= 1
        assert info.value.body["error"]["code"] == "429"


async def test_a_refused_key_is_an_authentication_error() -> None:
    async with _emulator() as emu, create_session(connect_timeout=2.0) as http:
        provider = ProviderConfig(
            name="az", kind="azure", base_url=f"{emu.url}/az/openai/v1", api_key=Secret("wrong-key")
        )
        client = make_chat_client(provider, SessionTransport(http), TIMEOUTS)
        with pytest.raises(AuthenticationError):
            await client.send(dict(BODY), model="dep")


async def test_the_openai_sdk_azure_client_reads_chat_and_batch_answers() -> None:
    clock = FakeClock()
    config = emulator_config_from_dict(
        {
            "providers": [
                {
                    "name": "az",
                    "family": "azure",
                    "api_key": KEY,
                    "models": ["dep"],
                    "limits": {"rpm": 10**6},
                    "batch": {"processing_seconds": 10.0},
                }
            ]
        }
    )
    async with (
        Emulator(config, clock=clock) as emu,
        openai.AsyncAzureOpenAI(
            azure_endpoint=emu.base_url("az"), api_key=KEY, api_version=VERSION, max_retries=0
        ) as client,
    ):
        chat = await client.chat.completions.create(
            model="dep", messages=[{"role": "user", "content": PROMPT}], max_tokens=5
        )
        assert chat.choices[0].message.content == "positive"
        assert chat.usage is not None
        assert chat.usage.prompt_tokens > 0
        lines = [
            {
                "custom_id": f"r{i}",
                "method": "POST",
                "url": "/chat/completions",
                "body": {**BODY, "model": "dep"},
            }
            for i in range(3)
        ]
        data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
        uploaded = await client.files.create(file=("in.jsonl", data), purpose="batch")
        batch = await client.batches.create(
            input_file_id=uploaded.id,
            endpoint="/chat/completions",  # type: ignore[arg-type]  # Azure's form, as its batch guide writes it
            completion_window="24h",
        )
        clock.advance(11.0)
        done = await client.batches.retrieve(batch.id)
        assert done.status == "completed"
        assert done.request_counts is not None
        assert done.request_counts.completed == 3
        assert done.output_file_id is not None
        content = await client.files.content(done.output_file_id)
        out = [orjson.loads(x) for x in content.text.splitlines()]
        assert sorted(x["custom_id"] for x in out) == ["r0", "r1", "r2"]
        assert {x["response"]["body"]["choices"][0]["message"]["content"] for x in out} == {"positive"}


@pytest.mark.parametrize(
    ("path", "config"),
    [("/openai/deployments/dep?api-version=" + VERSION, {}), ("/openai/v1", {"deployment": "dep"})],
)
@pytest.mark.parametrize(
    ("endpoint", "body", "kind"),
    [
        ("embeddings", {"input": "a review"}, "list"),
        ("responses", {"input": PROMPT, "max_output_tokens": 16}, "response"),
        ("completions", {"prompt": PROMPT, "max_tokens": 5}, "text_completion"),
    ],
)
async def test_other_endpoints_reach_azure_as_published(
    path: str, config: dict[str, Any], endpoint: str, body: dict[str, Any], kind: str
) -> None:
    """Embeddings and completions under the deployment, the Responses API at `/openai/responses`
    (the body naming the deployment) or on v1."""
    async with _emulator() as emu, create_session(connect_timeout=2.0) as http:
        provider = ProviderConfig(
            name="az", kind="azure", base_url=f"{emu.url}/az{path}", api_key=Secret(KEY), **config
        )
        client = make_chat_client(provider, SessionTransport(http), TIMEOUTS)
        answer = await client.send({**body, ENDPOINT_KEY: endpoint}, model="dep")
        assert answer.body["object"] == kind
        assert emu.stats()["unrouted"] == 0


async def test_an_emulated_azure_provider_without_api_version_uses_the_v1_surface() -> None:
    async with _emulator() as emu, create_session(connect_timeout=2.0) as http:
        provider = ProviderConfig(name="az", kind="azure", base_url="emulator", api_key=Secret(KEY))
        client = make_chat_client(provider, SessionTransport(http), TIMEOUTS, base_url=emu.base_url("az"))
        answer = await client.send(dict(BODY), model="dep")
        assert answer.body["model"] == "dep"
        assert emu.stats()["unrouted"] == 0


async def test_an_openai_http_error_names_the_url_it_went_to() -> None:
    """Before: `oa: HTTP 404 ...` and no address, so a wrong base_url could not be seen."""
    config = emulator_config_from_dict({"providers": [{"name": "oa", "family": "openai", "models": ["m"]}]})
    async with Emulator(config) as emu, create_session(connect_timeout=2.0) as http:
        provider = ProviderConfig(name="oa", kind="openai", base_url=emu.base_url("oa") + "?sig=abc123")
        client = make_chat_client(provider, SessionTransport(http), TIMEOUTS)
        with pytest.raises(ModelRefusedError) as info:
            await client.send({**BODY, "model": "other"}, model="other")
        assert f"({emu.url}/oa/v1/chat/completions?sig=***)" in str(info.value)
        assert "abc123" not in str(info.value)
