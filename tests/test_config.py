"""The gateway config: the minimal documented shape loads, and every bad key is named."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

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
    assert alpha.max_concurrency == 50
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
            lambda d: d["providers"][0].update(kind="cohere"),
            "providers[0].kind",
            "must be one of openai, anthropic, azure",
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
        (lambda d: d.update(settings={"gc_threshold": -1}), "settings.gc_threshold", ">= 0"),
        (
            lambda d: d.update(settings={"timeouts": {"hedge": "no"}}),
            "settings.timeouts.hedge",
            "must be true or false",
        ),
        (lambda d: d.update(settings={"gc_threshold": "big"}), "settings.gc_threshold", "must be an integer"),
        (lambda d: d.update(job={"validate_regex": "("}), "job.validate_regex", "invalid regular expression"),
        (
            lambda d: d.update(prices={"gpt-4o-mini": {"input": 1}}),
            "prices.gpt-4o-mini.output",
            "is required",
        ),
        (  # a price no route uses: a typo that would leave the real model unpriced
            lambda d: d.update(prices={"gpt-4o-mnii": {"input": 1, "output": 2}}),
            "prices.gpt-4o-mnii",
            "no route sends to this model (they send to: gpt-4o-mini)",
        ),
        (
            lambda d: d.update(budget={"allow_unpriced": "yes"}),
            "budget.allow_unpriced",
            "must be true or false",
        ),
    ],
)
def test_bad_keys_are_named(mutate: object, key: str, reason: str) -> None:

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


def test_batch_mode_keys_default_to_online_with_batch_apis_available() -> None:
    cfg = config_from_dict(MINIMAL, environ={"OPENAI_API_KEY": "k"})
    alpha = cfg.provider("alpha")
    assert (alpha.batch_api, alpha.batch_max_requests, alpha.batch_max_bytes) == (True, None, None)
    assert cfg.routes[0].mode == "online"
    job = cfg.job
    assert (job.mode, job.deadline_hours, job.batch_turnaround_hours) == (None, None, 24.0)
    assert (job.batch_poll.initial, job.batch_poll.factor, job.batch_poll.maximum) == (5.0, 1.5, 60.0)


def test_batch_mode_keys_load() -> None:

    data: dict[str, Any] = copy.deepcopy(MINIMAL)
    data["providers"][0].update(batch_max_requests=1000, batch_max_bytes=2_000_000)
    data["providers"].append({"name": "local", "base_url": "http://127.0.0.1:8000/v1", "batch_api": False})
    data["routes"] = [
        {"model": "gpt-4o-mini", "targets": ["alpha"], "mode": "batch-api"},
        {"model": "llama", "targets": ["local"], "mode": "auto"},
    ]
    data["job"] = {
        "mode": "auto",
        "deadline_hours": 30,
        "batch_turnaround_hours": 2.5,
        "batch_poll": {"initial": 2, "factor": 2, "maximum": 30},
    }
    cfg = config_from_dict(data, environ={"OPENAI_API_KEY": "k"})
    assert cfg.provider("alpha").batch_max_requests == 1000
    assert cfg.provider("alpha").batch_max_bytes == 2_000_000
    assert cfg.provider("local").batch_api is False
    assert [r.mode for r in cfg.routes] == ["batch-api", "auto"]
    assert (cfg.job.mode, cfg.job.deadline_hours, cfg.job.batch_turnaround_hours) == ("auto", 30.0, 2.5)
    assert (cfg.job.batch_poll.initial, cfg.job.batch_poll.factor, cfg.job.batch_poll.maximum) == (2, 2, 30)
    small = config_from_dict(
        {**data, "job": {"batch_poll": {"initial": 90}}}, environ={"OPENAI_API_KEY": "k"}
    )
    assert (small.job.batch_poll.initial, small.job.batch_poll.maximum) == (90.0, 90.0)


@pytest.mark.parametrize(
    ("mutate", "key", "reason"),
    [
        (
            lambda d: d["routes"][0].update(mode="batch"),
            "routes[0].mode",
            "must be one of online, batch-api, auto",
        ),
        (
            lambda d: (d["providers"][0].update(batch_api=False), d["routes"][0].update(mode="batch-api")),
            "routes[0].mode",
            "no target provider has batch_api enabled",
        ),
        (lambda d: d["providers"][0].update(batch_api="yes"), "providers[0].batch_api", "true or false"),
        (lambda d: d["providers"][0].update(batch_max_requests=0), "providers[0].batch_max_requests", ">= 1"),
        (lambda d: d["providers"][0].update(batch_max_bytes=1.5), "providers[0].batch_max_bytes", "integer"),
        (lambda d: d.update(job={"mode": "fast"}), "job.mode", "expected one of online, batch-api, auto"),
        (lambda d: d.update(job={"deadline_hours": -1}), "job.deadline_hours", "hours above 0"),
        (lambda d: d.update(job={"priority": "urgent"}), "job.priority", "expected one of high, normal, low"),
        (lambda d: d.update(job={"not_before": "9999-12-31T23:59:59-14:00"}), "job.not_before", "2200"),
        (lambda d: d.update(job={"metadata": {"k" * 65: "v"}}), "job.metadata", "keys of 1 to 64"),
        (lambda d: d.update(job={"callback_url": "ftp://x"}), "job.callback_url", "http(s) URL"),
        (lambda d: d.update(job={"batch_turnaround_hours": 0}), "job.batch_turnaround_hours", "> 0"),
        (lambda d: d.update(job={"batch_poll": {"factor": 0.5}}), "job.batch_poll.factor", ">= 1"),
        (
            lambda d: d.update(job={"batch_poll": {"initial": 10, "maximum": 5}}),
            "job.batch_poll.maximum",
            ">= initial",
        ),
        (lambda d: d.update(job={"batch_poll": {"every": 5}}), "job.batch_poll.every", "unknown key"),
        (lambda d: d.update(job={"batch_poll": 5}), "job.batch_poll", "must be a mapping"),
    ],
)
def test_bad_batch_mode_keys_are_named(mutate: object, key: str, reason: str) -> None:

    data = copy.deepcopy(MINIMAL)
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, source="cfg.yaml", environ={"OPENAI_API_KEY": "k"})
    assert info.value.key == key
    assert reason in info.value.reason


def _per_model(models: Any, routes: list[dict[str, Any]] | None = None, **limits: Any) -> Any:
    data: dict[str, Any] = copy.deepcopy(MINIMAL)
    data["providers"][0]["limits"] = {"max_concurrency": 50, **limits}
    data["providers"][0]["models"] = models
    if routes is not None:
        data["routes"] = routes
    return config_from_dict(data, source="cfg.yaml", environ={"OPENAI_API_KEY": "k"})


def test_models_cut_an_entry_into_a_quota_per_model() -> None:
    """`models:` gives one key a quota per model (or per pool "a,b" models share); each route's
    target is the quota of the model it sends, the entry's `limits` hold the models not listed."""
    routes = [
        {"model": "gpt-4o", "targets": ["alpha"]},
        {"model": "mini", "targets": ["alpha:gpt-4.1-mini"]},
        {"model": "other", "targets": ["alpha"]},
    ]
    models = {
        "gpt-4o": {"rpm": 500, "tpm": 30000},
        "gpt-4o-mini, gpt-4.1-mini": {"rpm": 5000},
        "o3": {"rpm": 9},
    }
    cfg = _per_model(models, routes, rpm=100, burst_seconds=2)
    names = [p.name for p in cfg.providers]
    assert names == ["alpha", "alpha/gpt-4o", "alpha/gpt-4o-mini,gpt-4.1-mini"]  # o3: no route
    four = cfg.provider("alpha/gpt-4o")
    assert (four.limits.rpm, four.limits.tpm, four.limits.burst_seconds) == (500, 30000, 2)
    assert (four.models, four.entry, four.entry_name, four.max_concurrency) == (
        ("gpt-4o",),
        "alpha",
        "alpha",
        50,
    )
    assert cfg.provider("alpha/gpt-4o-mini,gpt-4.1-mini").models == ("gpt-4o-mini", "gpt-4.1-mini")
    assert [t.provider for r in cfg.routes for t in r.targets] == [
        "alpha/gpt-4o",
        "alpha/gpt-4o-mini,gpt-4.1-mini",
        "alpha",
    ]
    assert cfg.provider("alpha").limits.rpm == 100
    only_listed = _per_model({"gpt-4o-mini": {"rpm": 5, "max_concurrency": 2}})  # the entry: unused
    assert [(p.name, p.max_concurrency) for p in only_listed.providers] == [("alpha/gpt-4o-mini", 2)]


@pytest.mark.parametrize(
    ("models", "key", "reason"),
    [
        ([], "providers[0].models", "must map model names"),
        ({"gpt-4o-mini": {}}, "providers[0].models.gpt-4o-mini", "at least one of rpm"),
        ({"gpt-4o-mini": {"rpm": 0}}, "providers[0].models.gpt-4o-mini.rpm", "finite number"),
        ({"gpt-4o-mini": {"rmp": 5}}, "providers[0].models.gpt-4o-mini.rmp", "unknown key"),
        (
            {"a,gpt-4o-mini": {"rpm": 5}, "gpt-4o-mini": {"rpm": 5}},
            "providers[0].models.gpt-4o-mini",
            "one pool",
        ),
        ({"a,,b": {"rpm": 5}}, "providers[0].models.a,,b", "must name models"),
        (
            {"gpt-4o-mini": {"rpm": 5, "burst_seconds": 90}},
            "providers[0].models.gpt-4o-mini.burst_seconds",
            "60",
        ),
        (  # a typo: the route's model is not listed, and the entry has no limits of its own
            {"gpt4o-mini": {"rpm": 5}},
            "routes[0].targets[0]",
            "sends model 'gpt-4o-mini' to 'alpha', whose models: has no limits for it (it lists: gpt4o-mini)",
        ),
    ],
)
def test_bad_models_are_named(models: Any, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        _per_model(models)
    assert info.value.key == key
    assert reason in info.value.reason
