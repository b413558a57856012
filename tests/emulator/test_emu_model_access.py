"""A key without access to one model (`refused_models`): that model's requests get OpenAI's 403
`model_not_found`, before the quota (neither admitted nor charged); the key's other models serve;
a wrong key is still the 401 `invalid_api_key` for every model."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.errors import ConfigError

pytestmark = pytest.mark.integration
KEY = "sk-emu-access-123"


def _config(refused: Any, family: str = "openai") -> Any:
    provider = {"name": "p", "family": family, "api_key": KEY, "limits": {"rpm": 600}}
    return emulator_config_from_dict({"seed": 1, "providers": [provider | {"refused_models": refused}]})


async def _send(client: httpx.AsyncClient, emu: Emulator, model: str, key: str = KEY) -> httpx.Response:
    body = {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "echo hi"}]}
    headers = {"Authorization": f"Bearer {key}"}
    return await client.post(f"{emu.base_url('p')}/chat/completions", json=body, headers=headers)


async def test_a_refused_model_is_a_403_model_not_found_and_the_others_serve() -> None:
    async with Emulator(_config(["gpt-4o"])) as emu, httpx.AsyncClient() as client:
        refused = await _send(client, emu, "gpt-4o")
        served = await _send(client, emu, "gpt-4o-mini")
        wrong_key = await _send(client, emu, "gpt-4o-mini", key="sk-wrong")
        embedding = await client.post(
            f"{emu.base_url('p')}/embeddings",
            json={"model": "gpt-4o", "input": "hi"},
            headers={"Authorization": f"Bearer {KEY}"},
        )
        stats = emu.stats()["providers"]["p"]
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "model_not_found",
        None,
    )
    assert "does not have access to model `gpt-4o`" in error["message"]
    assert served.status_code == 200, served.text
    assert (wrong_key.status_code, wrong_key.json()["error"]["code"]) == (401, "invalid_api_key")
    assert (embedding.status_code, embedding.json()["error"]["code"]) == (403, "model_not_found")
    assert stats["rejected"]["model_refused"] == 2
    assert stats["admitted"] == 1  # the refused ones were never admitted


@pytest.mark.parametrize(
    ("refused", "family"),
    [([], "openai"), (["a", ""], "openai"), ("gpt-4o", "openai"), (["gpt-4o"], "anthropic")],
)
def test_bad_refused_models_name_the_key(refused: Any, family: str) -> None:
    with pytest.raises(ConfigError, match=r"providers\[0\]\.refused_models"):
        _config(refused, family)
