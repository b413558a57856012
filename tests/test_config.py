"""The gateway config: the minimal documented shape loads, and every bad key is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchgate.config import Secret, config_from_dict, load_config
from batchgate.errors import ConfigError

MINIMAL = {
    "providers": [
        {
            "name": "alpha",
            "kind": "openai",
            "base_url": "https://api.openai.com/v1",
            "api_key_env": "OPENAI_API_KEY",
            "limits": {"rpm": 500, "tpm": 200000, "max_concurrency": 50},
        }
    ],
    "routes": [{"model": "gpt-4o-mini", "targets": ["alpha"]}],
}


def test_minimal_shape_loads_with_defaults() -> None:
    cfg = config_from_dict(MINIMAL, environ={"OPENAI_API_KEY": "sk-secret-1"})
    alpha = cfg.provider("alpha")
    assert alpha.limits.rpm == 500
    assert alpha.limits.max_concurrency == 50
    assert alpha.api_key == Secret("sk-secret-1")
    assert cfg.routes[0].targets[0].provider == "alpha"
    assert cfg.routes[0].targets[0].model is None
    assert cfg.settings.retry.max_attempts >= 2
    assert cfg.route_models() == {"gpt-4o-mini"}


def test_secret_never_shows_in_repr() -> None:
    cfg = config_from_dict(MINIMAL, environ={"OPENAI_API_KEY": "sk-secret-1"})
    assert "sk-secret-1" not in repr(cfg)
    assert "sk-secret-1" not in str(cfg.provider("alpha").api_key)


def test_renamed_target() -> None:
    data = {**MINIMAL, "routes": [{"model": "m", "targets": ["alpha:gpt-4o-2024"]}]}
    cfg = config_from_dict(data, environ={"OPENAI_API_KEY": "k"})
    assert cfg.routes[0].targets[0].model == "gpt-4o-2024"


@pytest.mark.parametrize(
    ("mutate", "key", "reason"),
    [
        (
            lambda d: d["providers"][0].update(kind="azure"),
            "providers[0].kind",
            "must be 'openai' or 'anthropic'",
        ),
        (lambda d: d["providers"][0]["limits"].update(rpm=-1), "providers[0].limits.rpm", "finite number"),
        (
            lambda d: d["providers"][0]["limits"].update(rpm="fast"),
            "providers[0].limits.rpm",
            "must be a number",
        ),
        (lambda d: d["providers"][0].update(colour="red"), "providers[0].colour", "unknown key"),
        (lambda d: d["routes"][0].update(targets=["nobody"]), "routes[0].targets[0]", "unknown provider"),
        (lambda d: d.update(routes=[]), "routes", "must not be empty"),
        (lambda d: d["providers"].append(dict(d["providers"][0])), "providers[1].name", "duplicate"),
        (lambda d: d.update(settings={"retry": {"max_attempts": 0}}), "settings.retry.max_attempts", ">= 1"),
        (lambda d: d.update(job={"validate_regex": "("}), "job.validate_regex", "invalid regular expression"),
        (lambda d: d.update(prices={"m": {"input": 1}}), "prices.m.output", "is required"),
    ],
)
def test_bad_keys_are_named(mutate: object, key: str, reason: str) -> None:
    import copy

    data = copy.deepcopy(MINIMAL)
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, source="cfg.yaml", environ={"OPENAI_API_KEY": "k"})
    assert info.value.file == "cfg.yaml"
    assert info.value.key == key
    assert reason in info.value.reason


def test_unset_key_variable_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(MINIMAL, source="cfg.yaml", environ={})
    assert info.value.key == "providers[0].api_key_env"
    assert "OPENAI_API_KEY" in info.value.reason


def test_emulated_provider_needs_no_key_but_needs_emulator_section() -> None:
    data = {
        "providers": [{"name": "alpha", "base_url": "emulator", "api_key_env": "NOPE"}],
        "routes": [{"model": "m", "targets": ["alpha"]}],
    }
    with pytest.raises(ConfigError, match="no emulator section"):
        config_from_dict(data, environ={})
    cfg = config_from_dict({**data, "emulator": {"providers": []}}, environ={})
    assert cfg.provider("alpha").emulated


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("providers: [\n  - name: x\n  bad", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid YAML") as info:
        load_config(bad)
    assert str(bad) in str(info.value)
    not_map = tmp_path / "list.yaml"
    not_map.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(not_map)
