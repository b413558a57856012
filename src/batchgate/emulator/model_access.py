"""The models an emulated provider's key may not use (`refused_models`), and what it answers.

A key can lack access to one model while its other models serve. OpenAI then answers that model's
requests with a 403 whose body names the model and says `model_not_found`:
`{"error": {"message": "Project `proj_…` does not have access to model `gpt-4o-mini`", "type":
"invalid_request_error", "param": null, "code": "model_not_found"}}` (as users have met it:
github.com/cursor/cursor/issues/2953, github.com/Aider-AI/aider/issues/1903) — where a key refused
whole is the 401 `invalid_api_key` for every model, and a model the key cannot see at all the 404
`model_not_found` of `models`. OpenAI family only: Anthropic's 403 `permission_error` ("Your API
key does not have permission to use the specified resource", its errors page) does not say which
resource, so a client cannot tell it from a refused key. `OpenAIFamily.check_access` answers it
before the quota, as the 401 is: neither admitted nor charged (counted under `model_refused`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.errors import ConfigError

PROJECT = "proj_emulator"


def read_refused_models(entry: Mapping[str, Any], source: str, key: str, family: str) -> tuple[str, ...]:
    """The `refused_models` of the provider entry at `key`: a non-empty list of model names (none
    by default); an OpenAI provider's only."""
    value, key = entry.get("refused_models"), f"{key}.refused_models"
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(x, str) and x for x in value):
        raise ConfigError(source, key, "must be a non-empty list of model names")
    if family == "anthropic":
        raise ConfigError(source, key, "only openai and azure providers have refused_models")
    return tuple(value)


def refusal(refused: tuple[str, ...], model: str) -> str | None:
    """OpenAI's message when the key may not use `model` (its 403 `model_not_found`), else None."""
    if model not in refused:
        return None
    return f"Project `{PROJECT}` does not have access to model `{model}`"
