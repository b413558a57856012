"""Config validation: every bad key is named by its path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from batchgate.emulator import emulator_config_from_dict, load_emulator_config
from batchgate.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "emulator.yaml"


def good(**provider_fields: Any) -> dict[str, Any]:
    return {"providers": [{"name": "alpha", "family": "openai", **provider_fields}]}


def test_the_example_config_loads() -> None:
    cfg = load_emulator_config(EXAMPLE)
    assert [p.name for p in cfg.providers] == ["alpha", "beta", "gamma"]
    beta = cfg.provider("beta")
    assert beta.enforced is not None
    assert beta.enforced.rpm == 240
    assert beta.limit_changes[0].limits.rpm == 120
    assert "sk-demo-beta" not in repr(beta)  # keys stay out of reprs


def test_defaults() -> None:
    cfg = emulator_config_from_dict(good())
    p = cfg.providers[0]
    assert (cfg.seed, cfg.window_seconds, p.default_max_tokens, p.concurrency.overflow) == (
        0,
        1.0,
        1024,
        "queue",
    )


def test_enforcement_charge_and_headers_read_in_both_shapes() -> None:
    cfg = emulator_config_from_dict(
        {
            "window_seconds": 2,
            "providers": [
                {"name": "a", "family": "openai", "enforcement": "fixed_window", "headers": "window"},
                {
                    "name": "b",
                    "family": "anthropic",
                    "enforcement": {"kind": "sliding_window", "window_seconds": 10},
                    "charge": {"chars_per_token": 4},
                    "headers": "none",
                    "concurrency": {"max": 16, "overflow": "reject", "status": 429},
                },
            ],
        }
    )
    a, b = cfg.providers
    assert (a.enforcement.kind, a.enforcement.seconds, a.charge.exact, a.headers) == (
        "fixed_window",
        None,  # resolved to the top-level window_seconds by the quota
        True,
        "window",
    )
    assert (b.enforcement.kind, b.enforcement.seconds, b.charge.chars_per_token, b.headers) == (
        "sliding_window",
        10.0,
        4.0,
        "none",
    )
    assert b.concurrency.status == 429
    default = emulator_config_from_dict(good()).providers[0]
    assert (default.enforcement.kind, default.charge.exact, default.headers) == (
        "token_bucket",
        True,
        "minute",
    )


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"providers": []}, "providers"),
        ({"providers": [{"name": "a", "family": "openai"}], "bogus": 1}, "bogus"),
        ({"seed": "x", **good()}, "seed"),
        ({"window_seconds": 0, **good()}, "window_seconds"),
        ({"window_seconds": 120, **good()}, "window_seconds"),
        ({"providers": [{"family": "openai"}]}, "providers[0].name"),
        ({"providers": [{"name": "a", "family": "cohere"}]}, "providers[0].family"),
        (good(limits={"rpm": -1}), "providers[0].limits.rpm"),
        (good(limits={"rpm": True}), "providers[0].limits.rpm"),
        (good(limits={"itpm": 5}), "providers[0].limits.itpm"),
        (good(limits={"rps": 5}), "providers[0].limits.rps"),
        (good(enforced={"tpm": "lots"}), "providers[0].enforced.tpm"),
        (good(limit_changes=[{"rpm": 5}]), "providers[0].limit_changes[0].at"),
        (good(limit_changes=[{"at": 1}]), "providers[0].limit_changes[0]"),
        (good(limit_changes=[{"at": 5, "rpm": 1}, {"at": 1, "rpm": 2}]), "providers[0].limit_changes[1].at"),
        (good(concurrency={"max": 0}), "providers[0].concurrency.max"),
        (good(concurrency={"overflow": "drop"}), "providers[0].concurrency.overflow"),
        (good(latency={"ttft_p50_ms": -1}), "providers[0].latency.ttft_p50_ms"),
        (good(latency={"jitter": 1}), "providers[0].latency.jitter"),
        (good(faults={"hang": 1.5}), "providers[0].faults.hang"),
        (good(faults={"explode": 0.1}), "providers[0].faults.explode"),
        (good(faults={"hang": 0.6, "reset": 0.6}), "providers[0].faults"),
        (good(api_key=""), "providers[0].api_key"),
        (good(models=[]), "providers[0].models"),
        (good(default_max_tokens=0), "providers[0].default_max_tokens"),
        (good(enforcement="leaky_bucket"), "providers[0].enforcement"),
        (good(enforcement=5), "providers[0].enforcement"),
        (good(enforcement={"window_seconds": 1}), "providers[0].enforcement.kind"),
        (
            good(enforcement={"kind": "sliding_window", "window_seconds": 0}),
            "providers[0].enforcement.window_seconds",
        ),
        (
            good(enforcement={"kind": "fixed_window", "window_seconds": 61}),
            "providers[0].enforcement.window_seconds",
        ),
        (
            good(enforcement={"kind": "sliding_window", "burst_seconds": 1}),
            "providers[0].enforcement.burst_seconds",
        ),
        (
            good(enforcement={"kind": "token_bucket", "burst_seconds": "1s"}),
            "providers[0].enforcement.burst_seconds",
        ),
        (good(charge="estimate"), "providers[0].charge"),
        (good(charge={"chars_per_token": 0}), "providers[0].charge.chars_per_token"),
        (good(charge={"chars_per_token": 4, "extra": 1}), "providers[0].charge"),
        (good(headers="hourly"), "providers[0].headers"),
        (
            good(concurrency={"max": 2, "overflow": "reject", "status": 500}),
            "providers[0].concurrency.status",
        ),
        (
            {"providers": [{"name": "a", "family": "openai"}, {"name": "a", "family": "anthropic"}]},
            "providers[1].name",
        ),
    ],
)
def test_bad_config_names_the_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        emulator_config_from_dict(data, source="emu.yaml")
    assert info.value.key == key
    assert info.value.file == "emu.yaml"
    assert str(info.value).startswith(f"emu.yaml: {key}: ")


def test_yaml_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("providers:\n  - name: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: invalid YAML at line \d"):
        load_emulator_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_emulator_config(tmp_path / "missing.yaml")
