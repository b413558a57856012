"""The benchmark's scenarios: what the emulated providers enforce, what clients are told, the workload,
and which systems run it. `build(name, quick)` returns a `Scenario`; `SCENARIOS` lists the names.

Time compression: quotas are about ten times a typical paid tier's, so a job that takes minutes
against real providers takes 10–40 s here; the cookbook processor's 15 s pause after a 429 is
compressed by the same factor (`COMPRESSION`). Per-minute limits are enforced over one-second
windows (`window_seconds: 1`), as OpenAI documents ("a 600 RPM limit can reject 20 requests sent in
one second").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workload import Request, make_requests

COMPRESSION = 10.0
COOKBOOK_PAUSE = 15.0 / COMPRESSION
PEERS = ("gather", "semaphore", "langchain", "litellm", "cookbook", "batchgate", "batchgate-cli")
MODELS = {"alpha": "gpt-4o-mini", "beta": "gpt-4.1-nano", "gamma": "claude-3-5-haiku-latest"}


@dataclass(slots=True)
class Scenario:
    name: str
    title: str
    description: str
    emulator: dict[str, Any]  # the emulator YAML, as a mapping (base URLs are filled in later)
    requests: list[Request]
    systems: tuple[str, ...]
    timeout: float | None = None
    targets: str = ""
    items: int = 0  # distinct items (each may go to several providers)
    cli_input_lines: int = 0  # >0: the memory scenario (a generated CLI input of this many lines)
    notes: list[str] = field(default_factory=list)

    def families(self) -> dict[str, str]:
        return {p["name"]: p["family"] for p in self.emulator["providers"]}

    def declared(self) -> dict[str, dict[str, int]]:
        return {p["name"]: dict(p.get("limits", {})) for p in self.emulator["providers"]}

    def enforced(self) -> dict[str, dict[str, int]]:
        return {p["name"]: dict(p.get("enforced") or p.get("limits", {})) for p in self.emulator["providers"]}


def _provider(name: str, family: str, limits: dict[str, int], latency: dict[str, float], **kw: Any) -> Any:
    return {"name": name, "family": family, "limits": limits, "latency": latency, **kw}


def _emulator(*providers: dict[str, Any]) -> dict[str, Any]:
    return {"seed": 7, "window_seconds": 1.0, "providers": list(providers)}


def _scale(limits: dict[str, int], f: float) -> dict[str, int]:
    return {k: int(v * f) for k, v in limits.items()}


def three_providers(quick: bool) -> Scenario:
    items, f = (300, 0.6) if quick else (1000, 1.0)
    lat = {"ttft_sigma": 0.4, "per_token_ms": 8}
    emu = _emulator(
        _provider("alpha", "openai", _scale({"rpm": 4800, "tpm": 400_000}, f), {"ttft_p50_ms": 300, **lat}),
        _provider("beta", "openai", _scale({"rpm": 3600, "tpm": 240_000}, f), {"ttft_p50_ms": 450, **lat}),
        _provider(
            "gamma",
            "anthropic",
            _scale({"rpm": 4000, "itpm": 200_000, "otpm": 30_000}, f),
            {"ttft_p50_ms": 400, **lat},
        ),
    )
    return Scenario(
        "three_providers",
        "Three providers, every item to all three (truthful limits)",
        f"{items} short sentiment-classification items, each sent to alpha (OpenAI-style), beta "
        "(OpenAI-style) and gamma (Anthropic-style) — the published three-model experiment, "
        "time-compressed. Limits are truthful; each provider binds on a different dimension.",
        emu,
        make_requests(items, ["alpha", "beta", "gamma"], max_tokens=8),
        ("serial", *PEERS),
        targets="batchgate: 0 failed, makespan ≤ 1.10 × bound, 429s ≤ 1% of requests",
        items=items,
    )


def token_bound(quick: bool) -> Scenario:
    items = 250 if quick else 500
    emu = _emulator(
        _provider(
            "alpha",
            "openai",
            {"rpm": 6000, "tpm": 2_400_000},
            {"ttft_p50_ms": 400, "ttft_sigma": 0.4, "per_token_ms": 10},
        )
    )
    return Scenario(
        "token_bound",
        "One provider, token limit binds first (long prompts)",
        f"{items} requests with ~1,200-token prompts and max_tokens 100 to one OpenAI-style provider "
        "whose tokens-per-minute limit binds long before its request limit.",
        emu,
        make_requests(items, ["alpha"], max_tokens=100, filler_words=900),
        PEERS,
        targets="batchgate: 0 failed, makespan ≤ 1.10 × bound, 429s ≤ 1% of requests",
        items=items,
    )


def declared_2x(quick: bool) -> Scenario:
    items = 400 if quick else 800
    emu = _emulator(
        _provider(
            "alpha",
            "openai",
            {"rpm": 6000, "tpm": 1_000_000},
            {"ttft_p50_ms": 300, "ttft_sigma": 0.4, "per_token_ms": 8},
            enforced={"rpm": 3000, "tpm": 500_000},
        )
    )
    return Scenario(
        "declared_2x",
        "Declared limit twice the enforced one",
        f"{items} short requests to one provider that declares (in its docs and rate-limit headers) "
        "twice the limits it enforces. Every system is configured with the declared limits; the "
        "bound uses the enforced ones.",
        emu,
        make_requests(items, ["alpha"], max_tokens=8),
        PEERS,
        targets="batchgate: 0 failed, 429s ≤ 5% of requests, makespan ≤ 1.3 × bound (true limit)",
        items=items,
    )


def faults(quick: bool) -> Scenario:
    items = 200 if quick else 400
    lat = {"ttft_sigma": 0.4, "per_token_ms": 8}
    common = {"server_error": 0.05, "hang": 0.01}
    emu = _emulator(
        _provider(
            "alpha", "openai", {"rpm": 3000, "tpm": 300_000}, {"ttft_p50_ms": 300, **lat}, faults=common
        ),
        _provider(
            "beta",
            "openai",
            {"rpm": 3000, "tpm": 300_000},
            {"ttft_p50_ms": 400, **lat},
            faults={**common, "rate_limit_no_hint": 0.05},
        ),
        _provider(
            "gamma",
            "anthropic",
            {"rpm": 3000, "itpm": 200_000, "otpm": 30_000},
            {"ttft_p50_ms": 350, **lat},
            faults=common,
        ),
    )
    return Scenario(
        "faults",
        "Faults: 5% 5xx, 1% hangs, one provider's 429s without retry hints",
        f"{items} items to all three providers; every provider answers 5% of admitted requests with a "
        "5xx and leaves 1% hanging; beta also refuses 5% with a 429 that carries no retry hint. "
        "Every system gets the same 5 s per-request timeout (the SDKs' 600 s default would make each "
        "hang cost ten minutes).",
        emu,
        make_requests(items, ["alpha", "beta", "gamma"], max_tokens=8),
        PEERS,
        timeout=5.0,
        targets="batchgate: 0 failed",
        items=items,
    )


def overhead(quick: bool) -> Scenario:
    items = 3000 if quick else 5000
    emu = _emulator(_provider("alpha", "openai", {}, {"ttft_p50_ms": 0, "per_token_ms": 0}))
    return Scenario(
        "overhead",
        "Overhead: zero latency, unlimited quota",
        f"{items} short requests to one provider that answers at once and never limits: what each "
        "client costs in CPU per request, and how many requests per second it sustains.",
        emu,
        make_requests(items, ["alpha"], max_tokens=8),
        ("serial", *PEERS, "aiohttp-floor"),
        targets="batchgate: client CPU ≤ 0.3 ms per request, ≥ 2,000 requests/s",
        items=items,
    )


def memory(quick: bool) -> Scenario:
    lines = 100_000 if quick else 1_000_000
    emu = _emulator(_provider("alpha", "openai", {}, {"ttft_p50_ms": 0, "per_token_ms": 0}))
    scenario = Scenario(
        "memory",
        f"A {lines:,}-line job (batchgate CLI only)",
        f"`batchgate run` on a generated {lines:,}-line input (written to a temporary directory, never "
        "committed) against one zero-latency, unlimited provider: peak RSS of the CLI process.",
        emu,
        [],
        ("batchgate-cli",),
        targets="batchgate: memory stays bounded (peak RSS independent of the input's length)",
        items=lines,
        cli_input_lines=lines,
    )
    if quick:
        scenario.notes.append("--quick: 100,000 lines instead of 1,000,000.")
    return scenario


SCENARIOS: dict[str, Callable[[bool], Scenario]] = {
    "three_providers": three_providers,
    "token_bound": token_bound,
    "declared_2x": declared_2x,
    "faults": faults,
    "overhead": overhead,
    "memory": memory,
}


def build(name: str, quick: bool) -> Scenario:
    return SCENARIOS[name](quick)
