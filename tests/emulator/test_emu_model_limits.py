"""Per-model quotas on one key (`model_limits`): OpenAI limits each model apart and a few models
share one pool (shared/PROTOCOLS.md, "Limits are per model"); a model in no group has the key's."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.errors import ConfigError

pytestmark = pytest.mark.integration


def _config(**model_limits: Any) -> Any:
    provider = {
        "name": "p",
        "family": "openai",
        "limits": {"rpm": 600},  # the key's own: 10 requests in its 1 s bucket
        "enforcement": {"kind": "token_bucket", "burst_seconds": 1},
        "model_limits": model_limits,
    }
    return emulator_config_from_dict({"seed": 1, "providers": [provider]})


async def _send(client: httpx.AsyncClient, emu: Emulator, model: str) -> httpx.Response:
    body = {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "echo hi"}]}
    return await client.post(f"{emu.base_url('p')}/chat/completions", json=body)


async def test_each_model_group_has_its_own_quota_and_headers() -> None:
    cfg = _config(**{"small": {"rpm": 120}, "large,large-2": {"rpm": 180}})  # 2 and 3 at once
    async with Emulator(cfg) as emu, httpx.AsyncClient() as client:
        small = [(await _send(client, emu, "small")).status_code for _ in range(3)]
        large = [(await _send(client, emu, m)).status_code for m in ("large", "large-2", "large", "large-2")]
        other = await _send(client, emu, "other")
        last_large = await _send(client, emu, "large")
    assert small == [200, 200, 429]
    assert large == [200, 200, 200, 429]  # the two share one pool of 3
    assert other.status_code == 200  # the key's own quota, untouched by the models'
    assert other.headers["x-ratelimit-limit-requests"] == "600"
    assert last_large.headers["x-ratelimit-limit-requests"] == "180"


@pytest.mark.parametrize(
    ("model_limits", "key"),
    [
        ({"a": {}}, "providers[0].model_limits.a"),
        ({"a,b": {"rpm": 1}, "b": {"rpm": 2}}, "providers[0].model_limits.b"),
        ({"a": {"itpm": 5}}, "providers[0].model_limits.a.itpm"),
    ],
)
def test_bad_model_limits_name_the_key(model_limits: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _config(**model_limits)
    assert key in str(info.value)
