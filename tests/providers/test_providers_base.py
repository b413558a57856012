"""Factories, the package surface, and keys kept out of reprs."""

from __future__ import annotations

import aiohttp
import pytest

import batchgate.providers
from batchgate.config import ProviderConfig, Secret, TimeoutConfig
from batchgate.errors import ConfigError
from batchgate.providers import (
    AnthropicClient,
    OpenAIClient,
    make_chat_client,
    make_token_counter,
)
from batchgate.providers.batch.factory import make_batch_client
from batchgate.providers.h1 import H1Transport
from batchgate.tokens import CharCounter, EstimatingTokenCounter, ExactTokenCounter

KEY = "sk-base-secret-42"
# bpe-openai loads encodings with importlib.resources.open_binary, deprecated since Python 3.11.
legacy_resources = pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")


def provider(kind: str = "openai", **kw: object) -> ProviderConfig:
    return ProviderConfig(name="alpha", kind=kind, base_url="https://example.invalid/v1", **kw)  # type: ignore[arg-type]


def test_exported_names() -> None:
    assert batchgate.providers.__all__ == sorted(batchgate.providers.__all__)
    assert set(batchgate.providers.__all__) == {
        "AnthropicClient",
        "OpenAIClient",
        "ProviderClient",
        "anthropic_to_openai",
        "error_for_exception",
        "error_for_response",
        "make_chat_client",
        "make_token_counter",
        "openai_to_anthropic",
        "parse_anthropic_rate_limits",
        "parse_openai_rate_limits",
    }


def test_make_chat_client_picks_by_kind_and_honours_base_url_override() -> None:
    session = H1Transport()  # nothing is sent
    oa = make_chat_client(provider("openai", api_key=Secret(KEY)), session, TimeoutConfig())
    an = make_chat_client(
        provider("anthropic", api_key=Secret(KEY)),
        session,
        TimeoutConfig(),
        base_url="http://127.0.0.1:9/gamma/",
    )
    assert isinstance(oa, OpenAIClient)
    assert (oa.name, oa.kind, oa.base_url) == ("alpha", "openai", "https://example.invalid/v1")
    assert isinstance(an, AnthropicClient)
    assert (an.kind, an.base_url) == ("anthropic", "http://127.0.0.1:9/gamma")
    for client in (oa, an):
        assert KEY not in repr(client)
        assert KEY not in str(client)


def test_emulated_provider_needs_a_base_url() -> None:
    cfg = ProviderConfig(name="alpha", kind="openai", base_url="emulator")
    session = H1Transport()
    with pytest.raises(ConfigError, match=r"providers\.alpha\.base_url"):
        make_chat_client(cfg, session, TimeoutConfig())
    assert isinstance(make_chat_client(cfg, session, TimeoutConfig(), base_url="http://x/v1"), OpenAIClient)


async def test_the_chat_and_batch_factories_refuse_alike() -> None:
    """Two seams, two factories (a chat client over a transport, a Batch API client over a
    session), one way of refusing a provider neither can address or whose kind neither knows."""
    emulated = ProviderConfig(name="alpha", kind="openai", base_url="emulator")
    unknown = provider("carrier-pigeon")
    async with aiohttp.ClientSession() as session:  # nothing is sent
        for cfg, where in ((emulated, "base_url"), (unknown, "kind")):
            with pytest.raises(ConfigError) as chat:
                make_chat_client(cfg, H1Transport(), TimeoutConfig())
            with pytest.raises(ConfigError) as batch:
                make_batch_client(cfg, session, TimeoutConfig())
            assert str(chat.value) == str(batch.value)
            assert f"providers.alpha.{where}" in str(chat.value)


@legacy_resources
def test_token_counter_auto_counts_characters_for_every_kind() -> None:
    # the reservation never depends on an exact tokenizer: the pool learns what a count is worth
    for kind in ("openai", "anthropic"):
        counter = make_token_counter(provider(kind))
        assert isinstance(counter, CharCounter)
        assert counter.count_prompt({"messages": [{"role": "user", "content": "x" * 400}]}) == 100


@legacy_resources
def test_token_counter_explicit_choices() -> None:
    assert isinstance(make_token_counter(provider("openai", tokenizer="estimate")), EstimatingTokenCounter)
    counter = make_token_counter(provider("anthropic", tokenizer="cl100k_base"))
    assert isinstance(counter, ExactTokenCounter)
    assert counter.encoding_name == "cl100k_base"


@legacy_resources
def test_unknown_tokenizer_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        make_token_counter(provider("openai", tokenizer="klingon_base"), source="gw.yaml")
    assert info.value.key == "providers.alpha.tokenizer"
    assert info.value.file == "gw.yaml"
    assert "klingon_base" in info.value.message
