"""The optional `batch:` section of an emulated provider: defaults and errors naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.emulator import emulator_config_from_dict
from batchgate.emulator.config import BatchConfig
from batchgate.errors import ConfigError


def config(batch: Any) -> dict[str, Any]:
    return {"providers": [{"name": "alpha", "family": "openai", "batch": batch}]}


def test_defaults_and_values() -> None:
    plain = emulator_config_from_dict({"providers": [{"name": "alpha", "family": "openai"}]})
    assert plain.providers[0].batch == BatchConfig()
    assert BatchConfig().processing_seconds == 2.0
    full = emulator_config_from_dict(
        config(
            {
                "processing_seconds": 0.5,
                "expire_after_seconds": 3,
                "enqueued_token_limit": 1000,
                "fail_validation": True,
                "max_requests": 10,
                "max_bytes": 4096,
            }
        )
    )
    assert full.providers[0].batch == BatchConfig(0.5, 3.0, 1000, True, 10, 4096)


@pytest.mark.parametrize(
    ("batch", "key"),
    [
        ({"processing_seconds": -1}, "providers[0].batch.processing_seconds"),
        ({"processing_seconds": "fast"}, "providers[0].batch.processing_seconds"),
        ({"expire_after_seconds": 0}, "providers[0].batch.expire_after_seconds"),
        ({"enqueued_token_limit": 0}, "providers[0].batch.enqueued_token_limit"),
        ({"enqueued_token_limit": 1.5}, "providers[0].batch.enqueued_token_limit"),
        ({"fail_validation": "yes"}, "providers[0].batch.fail_validation"),
        ({"max_requests": 0}, "providers[0].batch.max_requests"),
        ({"max_bytes": True}, "providers[0].batch.max_bytes"),
        ({"window": 5}, "providers[0].batch.window"),
        ([1, 2], "providers[0].batch"),
    ],
)
def test_errors_name_the_key(batch: Any, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        emulator_config_from_dict(config(batch))
    assert caught.value.key == key
