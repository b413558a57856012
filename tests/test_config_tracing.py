"""The config's `tracing:` key: a boolean or a mapping (`enabled`, `service_name`); anything else
is a one-line error naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.config import config_from_dict
from batchgate.config.tracing import TracingSettings
from batchgate.errors import ConfigError

BASE: dict[str, Any] = {
    "providers": [{"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
    "routes": [{"model": "m", "targets": ["a"]}],
}


def tracing(value: Any) -> TracingSettings:
    return config_from_dict({**BASE, "tracing": value}, environ={}).tracing


def test_tracing_is_off_unless_asked_for() -> None:
    assert config_from_dict(BASE, environ={}).tracing == TracingSettings(enabled=False)
    assert tracing(None) == TracingSettings(enabled=False)
    assert tracing(False) == TracingSettings(enabled=False)


def test_tracing_on_as_a_boolean_or_a_mapping() -> None:
    assert tracing(True) == TracingSettings(enabled=True)
    assert tracing({"service_name": "gw-eu"}) == TracingSettings(enabled=True, service_name="gw-eu")
    assert tracing({"enabled": False, "service_name": "x"}).enabled is False


@pytest.mark.parametrize(
    ("value", "key", "reason"),
    [
        ("yes", "tracing", "must be a mapping"),
        ({"enabled": "yes"}, "tracing.enabled", "must be true or false"),
        ({"service_name": ""}, "tracing.service_name", "non-empty string"),
        ({"endpoint": "http://x"}, "tracing.endpoint", "unknown key"),
    ],
)
def test_a_bad_tracing_value_names_its_key(value: Any, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        tracing(value)
    message = str(caught.value)
    assert key in message
    assert reason in message
    assert "\n" not in message
