"""A route across kinds with a Bedrock target, through the whole gateway over real sockets: a
Bedrock model that answers ServiceUnavailableException (the overload path) or
ThrottlingException (the rate path) hands its requests to the route's OpenAI target; every
request ends answered, in OpenAI's shape, and Bedrock's refusals are counted by their kind."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from batchgate.config import config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.gateway import Gateway

pytestmark = pytest.mark.integration

KEY_ID, SECRET = "AKIDFAILOVER01", "failover/secret"
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))


def _emulator(**bedrock: Any) -> Emulator:
    providers = [
        {
            "name": "br",
            "family": "bedrock",
            "api_key": f"{KEY_ID}:{SECRET}",
            "limits": {"rpm": 10**6},
            **bedrock,
        },
        {"name": "alpha", "family": "openai", "limits": {"rpm": 10**6}},
    ]
    return Emulator(emulator_config_from_dict({"seed": 4, "providers": providers}))


def _gateway(emu: Emulator) -> Gateway:
    config = config_from_dict(
        {
            "providers": [
                {"name": "br", "kind": "bedrock", "base_url": emu.base_url("br"), "region": "us-east-1"},
                {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")},
            ],
            "routes": [{"model": "m", "targets": [f"br:{BEDROCK_MODEL}", "alpha:gpt-4o-mini"]}],
            "settings": {"seed": 3, "retry": {"max_attempts": 6, "base_delay": 0.01, "max_delay": 0.05}},
        },
        environ={},
    )
    return Gateway(config)


@pytest.mark.parametrize(
    ("bedrock", "refusal", "kind"),
    [
        ({"faults": {"overloaded": 1.0}}, "fault", "overloaded"),
        ({"limits": {"rpm": 1}}, "rate_limit", "rate_limit"),
    ],
    ids=["unavailable", "throttled"],
)
async def test_a_refusing_bedrock_target_fails_over_to_the_openai_one(
    bedrock: dict[str, Any], refusal: str, kind: str
) -> None:
    async with _emulator(**bedrock) as emu, _gateway(emu) as gateway:
        bodies = [
            {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": f"item {i} is great"}]}
            for i in range(12)
        ]
        results = await asyncio.gather(*(gateway.arun(b, index=i) for i, b in enumerate(bodies)))
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]
        assert all(r.body is not None and r.body["object"] == "chat.completion" for r in results)
        failed = [a for r in results for a in r.attempts if a.provider == "br" and a.error_kind is not None]
        assert failed
        assert {a.error_kind for a in failed} == {kind}
        assert any(r.provider == "alpha" for r in results)
        stats = emu.stats()["providers"]["br"]
        assert (stats["faults"]["overloaded"] if refusal == "fault" else stats["rejected"]["rate_limit"]) > 0
        assert stats["rejected"]["auth"] == 0
