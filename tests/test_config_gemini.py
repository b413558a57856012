"""A `kind: gemini` provider entry: AI Studio by default, Vertex AI with `vertex: true` and its
project and location; every wrong key named in one line."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.config import config_from_dict
from batchgate.config.schema import VertexTarget
from batchgate.errors import ConfigError


def _config(**entry: Any) -> Any:
    provider = {
        "name": "gem",
        "kind": "gemini",
        "base_url": "https://generativelanguage.googleapis.com",
        **entry,
    }
    data = {"providers": [provider], "routes": [{"model": "m", "targets": ["gem"]}]}
    return config_from_dict(data, source="cfg.yaml", environ={"GEMINI_API_KEY": "k"})


def test_ai_studio_by_default() -> None:
    config = _config(api_key_env="GEMINI_API_KEY")
    provider = config.provider("gem")
    assert provider.kind == "gemini"
    assert provider.vertex is None


def test_vertex_with_project_and_location() -> None:
    config = _config(vertex=True, project="my-project", location="us-central1")
    assert config.provider("gem").vertex == VertexTarget("my-project", "us-central1")
    assert not config.provider("gem").batch_api  # Vertex's batch prediction is not used
    assert _config().provider("gem").batch_api  # AI Studio's batch mode is


@pytest.mark.parametrize(
    ("entry", "key", "words"),
    [
        ({"vertex": "yes"}, "providers[0].vertex", "true or false"),
        ({"vertex": True, "location": "us-central1"}, "providers[0].project", "required"),
        ({"vertex": True, "project": "p"}, "providers[0].location", "required"),
        ({"vertex": True, "project": "My Project", "location": "x"}, "providers[0].project", "project id"),
        ({"project": "p"}, "providers[0].project", "vertex: true"),
        ({"kind": "openai", "vertex": True}, "providers[0].vertex", "only for kind: gemini"),
        (
            {"vertex": True, "project": "p", "location": "l", "batch_api": True},
            "providers[0].batch_api",
            "not supported",
        ),
    ],
)
def test_a_wrong_entry_names_its_key(entry: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        _config(**entry)
    assert info.value.key == key
    assert words in info.value.reason
    assert "\n" not in str(info.value)
