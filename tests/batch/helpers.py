"""Helpers for the Batch API tests: emulator configs, clients, request factories and a clock that
lets a client's poll sleeps drive the emulator's FakeClock (so lifecycles run without real waits)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from batchgate.clock import Clock, FakeClock
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.policy.poll import PollPolicy
from batchgate.providers.batch.common import BatchClient, BatchRequest
from batchgate.providers.batch.factory import make_batch_client
from batchgate.providers.http import create_session

KINDS = ("openai", "anthropic", "azure")
API_VERSION = "2024-10-21"  # an Azure api-version (its GA REST reference)
TIMEOUTS = TimeoutConfig(connect=2.0, total=10.0)
REVIEWS = ("I loved it, wonderful", "terrible and boring", "it was a film", "great fun, would recommend")
LABELS = ("positive", "negative", "neutral", "positive")


def provider(name: str, family: str, **batch: Any) -> dict[str, Any]:
    """A provider with generous live limits and the given `batch` settings."""
    limits = {"rpm": 1_000_000, "itpm": 10**8, "otpm": 10**8} if family == "anthropic" else {"rpm": 10**6}
    return {"name": name, "family": family, "limits": limits, "batch": batch}


@asynccontextmanager
async def running(*providers: dict[str, Any], clock: FakeClock | None = None) -> AsyncIterator[Emulator]:
    config = emulator_config_from_dict({"seed": 3, "providers": list(providers)})
    async with Emulator(config, clock=clock) as emu:
        yield emu


@asynccontextmanager
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with create_session(connect_timeout=2.0) as s:
        yield s


def batch_client(
    emu: Emulator,
    name: str,
    http: aiohttp.ClientSession,
    clock: Clock | None = None,
    poll: PollPolicy | None = None,
) -> BatchClient:
    cfg = emulated(name, emu.config.provider(name).family)
    return make_batch_client(
        cfg, http, TIMEOUTS, base_url=emu.base_url(name), clock=clock, poll=poll or PollPolicy(1.0, 2.0, 4.0)
    )


def emulated(name: str, kind: str) -> ProviderConfig:
    """Provider `name` of `kind` served by the emulator (Azure's with an api-version)."""
    version = API_VERSION if kind == "azure" else None
    return ProviderConfig(name=name, kind=kind, base_url="emulator", api_version=version)  # type: ignore[arg-type]


def sentiment_requests(n: int, prefix: str = "r") -> list[BatchRequest]:
    """`n` OpenAI-shaped chat requests whose emulated answers are known sentiment labels."""
    return [
        BatchRequest(
            f"{prefix}{i}",
            {
                "model": "gpt-x",
                "messages": [{"role": "user", "content": f"Classify the sentiment: {REVIEWS[i % 4]}"}],
                "max_tokens": 10,
            },
        )
        for i in range(n)
    ]


def label(custom_id: str) -> str:
    return LABELS[int(custom_id.lstrip("abcdefghijklmnopqrstuvwxyz_")) % 4]
