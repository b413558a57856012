"""`refuse_unknown_fields`: the emulator answers a top-level field its wire does not know with the
provider's 400 (OpenAI's `unknown_parameter` naming it; Anthropic's "Extra inputs are not
permitted"), and lets every field of the wire through; off by default."""

from __future__ import annotations

import pytest

from batchgate.emulator.anthropic_api import AnthropicFamily
from batchgate.emulator.config import ProviderConfig, emulator_config_from_dict
from batchgate.emulator.openai_api import OpenAIFamily
from batchgate.emulator.openai_endpoints import parse_for
from batchgate.emulator.wire import ApiError
from batchgate.emulator.wire_fields import ANTHROPIC_MESSAGES, OPENAI_CHAT, WIRE_FIELDS, unknown_field
from batchgate.errors import ConfigError

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {**CHAT, "max_tokens": 5}


def strict(family: str, refuse: bool = True) -> ProviderConfig:
    entry = {"name": "p", "family": family, "limits": {"rpm": 100}, "refuse_unknown_fields": refuse}
    return emulator_config_from_dict({"providers": [entry]}).providers[0]


def test_an_unknown_field_is_openais_400_naming_it() -> None:
    with pytest.raises(ApiError) as caught:
        parse_for(OpenAIFamily(), "chat", {**CHAT, "top_k": 5}, strict("openai"))
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, "top_k", "unknown_parameter")
    assert "Unrecognized request argument supplied: top_k" in caught.value.message


def test_an_unknown_field_is_anthropics_400() -> None:
    with pytest.raises(ApiError, match="seed: Extra inputs are not permitted") as caught:
        parse_for(AnthropicFamily(), "chat", {**MESSAGES, "seed": 1}, strict("anthropic"))
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("family", "wire"), [("openai", OPENAI_CHAT), ("azure", OPENAI_CHAT), ("anthropic", ANTHROPIC_MESSAGES)]
)
def test_every_field_of_the_wire_is_known_and_others_are_not(family: str, wire: str) -> None:
    assert all(unknown_field({name: 1}, family, "chat") is None for name in WIRE_FIELDS[wire])
    assert unknown_field({"model": "m", "made_up": 1}, family, "chat") == "made_up"
    assert unknown_field({"made_up": 1}, family, "embeddings") is None or family == "anthropic"


def test_off_by_default_and_checked_as_a_boolean() -> None:
    parse_for(OpenAIFamily(), "chat", {**CHAT, "top_k": 5}, strict("openai", refuse=False))
    with pytest.raises(ConfigError, match="refuse_unknown_fields"):
        strict("openai", refuse="yes")  # type: ignore[arg-type]
