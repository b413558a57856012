"""A `kind: bedrock` entry's own keys (region, aws_profile, stream) read, and refused on other
kinds or with a wrong type; Bedrock has no Batch API here (batch_api defaults to false)."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.config import config_from_dict
from batchgate.config.bedrock import BedrockSettings
from batchgate.errors import ConfigError

URL = "https://bedrock-runtime.us-east-1.amazonaws.com"


def _config(**entry: Any) -> Any:
    provider = {"name": "br", "kind": "bedrock", "base_url": URL, **entry}
    data = {"providers": [provider], "routes": [{"model": "m", "targets": ["br:anthropic.claude-3-haiku"]}]}
    return config_from_dict(data, source="cfg.yaml", environ={})


def test_a_bedrock_entry_reads_its_settings() -> None:
    quotas = {"anthropic.claude-3-haiku": {"rpm": 50, "tpm": 4000}}  # per-model quotas
    cfg = _config(region="eu-west-1", aws_profile="batch", stream=True, models=quotas)
    assert cfg.providers  # the entry and its per-model quota each sign as the entry says
    for provider in cfg.providers:
        assert provider.kind == "bedrock"
        assert provider.bedrock == BedrockSettings(region="eu-west-1", profile="batch", stream=True)
        assert provider.batch_api is False
    assert any(p.limits.rpm == 50 for p in cfg.providers)
    assert _config().providers[0].bedrock == BedrockSettings()


@pytest.mark.parametrize(
    ("entry", "key", "reason"),
    [
        ({"stream": "yes"}, "providers[0].stream", "must be true or false"),
        ({"batch_api": True}, "providers[0].batch_api", "not supported"),
        ({"kind": "openai", "region": "us-east-1"}, "providers[0].region", "only for kind: bedrock"),
        ({"kind": "anthropic", "stream": True}, "providers[0].stream", "only for kind: bedrock"),
    ],
)
def test_a_wrong_bedrock_key_is_named(entry: dict[str, Any], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        _config(**entry)
    assert info.value.key == key
    assert reason in info.value.reason
