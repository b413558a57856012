"""Provider headers taking values from the environment (`${VAR}`) and the `kind: azure` keys."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from batchgate.config import Secret, config_from_dict
from batchgate.errors import ConfigError

RESOURCE = "https://x.openai.azure.com"


def _config(provider: dict[str, Any], environ: dict[str, str]) -> Any:
    entry = {"name": "az", "kind": "openai", "base_url": "https://gw.example.com/v1", **provider}
    data = {"providers": [entry], "routes": [{"model": "m", "targets": ["az"]}]}
    return config_from_dict(data, source="cfg.yaml", environ=environ)


def test_a_header_value_from_the_environment_is_a_secret() -> None:
    headers = {"api-key": "${AZURE_KEY}", "x-team": "search", "x-auth": "Bearer ${TOKEN}"}
    config = _config({"headers": headers}, {"AZURE_KEY": "k-123", "TOKEN": "t-456"})
    provider = config.providers[0]
    assert provider.headers == {"x-team": "search"}
    assert provider.secret_headers == {"api-key": Secret("k-123"), "x-auth": Secret("Bearer t-456")}
    assert provider.extra_headers() == {"x-team": "search", "api-key": "k-123", "x-auth": "Bearer t-456"}
    assert "k-123" not in repr(config)
    assert "t-456" not in repr(config)


def test_an_unset_variable_is_a_one_line_error_naming_the_key_and_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        _config({"headers": {"api-key": "${AZURE_KEY}"}}, {})
    assert info.value.file == "cfg.yaml"
    assert info.value.key == "providers[0].headers.api-key"
    assert "AZURE_KEY" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("entry", "key", "words"),
    [
        ({"kind": "azure", "base_url": "https://x.openai.azure.com"}, "api_version", "is required"),
        (
            {
                "kind": "azure",
                "base_url": "https://x.openai.azure.com/openai/deployments/a?api-version=v",
                "deployment": "b",
            },
            "deployment",
            "names deployment 'a'",
        ),
        ({"kind": "openai", "deployment": "d"}, "deployment", "only for kind: azure"),
    ],
)
def test_azure_keys_are_checked(entry: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        _config(entry, {})
    assert info.value.key == f"providers[0].{key}"
    assert words in str(info.value)


@pytest.mark.parametrize(
    "base_url",
    [
        "https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
        "https://x.openai.azure.com/openai/v1",
    ],
)
def test_azure_url_forms_that_carry_what_they_need(base_url: str) -> None:
    entry = {"kind": "azure", "base_url": base_url, "api_key_env": "AZURE_OPENAI_API_KEY"}
    provider = _config(entry, {"AZURE_OPENAI_API_KEY": "k"}).providers[0]
    assert provider.kind == "azure"
    assert provider.openai_wire
    assert provider.base_url == base_url


def test_an_unquoted_yaml_date_is_an_api_version() -> None:
    entry = {"kind": "azure", "base_url": RESOURCE, "api_version": date(2024, 10, 21)}
    assert _config(entry, {}).providers[0].api_version == "2024-10-21"
