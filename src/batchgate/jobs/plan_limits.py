"""What the plan says of one provider's limits: the time each limited dimension alone needs for
the provider's share of the work (requests a minute, tokens a minute, input and output tokens a
minute), which of them binds first (the longest), and a suggested concurrency from Little's law
with headroom: P50 latency × RPM / 60, plus 20 %.

The P50 latency comes from the config's embedded emulator for a provider it serves (its
`latency.ttft_p50_ms`, plus `per_token_ms` for each planned output token), else a stated default.

Output tokens a minute where the provider gives unused output back when the answer ends
(Anthropic's OTPM, shared/PROTOCOLS.md: `max_tokens` is held from admission to the answer's end,
then replaced by the real output): what binds is the output held in flight (each request's
`max_tokens` for one P50 latency, in a bucket of one minute's OTPM as Anthropic documents) plus
the output the answers really produce, unknown before they come — not `max_tokens` × requests,
which is what a provider keeping the charge needs (`kept_output`: that figure, and what would bind
then).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NotRequired, TypedDict

from batchgate.config import GatewayConfig, ProviderConfig

DEFAULT_P50_S = 1.0  # a provider without a latency to read: a typical short chat answer
HEADROOM = 0.2
HELD_BUCKET_S = 60.0  # Anthropic's output bucket holds a minute of OTPM (its rate-limit docs)


class Concurrency(TypedDict):
    """The suggested concurrency and the formula as printed (`value` None: no RPM to size it by)."""

    p50_s: float
    p50_source: str  # emulator | default
    rpm: float | None
    value: int | None
    formula: str


class KeptOutput(TypedDict):
    """A provider that gives unused output back: its OTPM time with every max_tokens kept."""

    otpm_seconds: float
    binding_limit: str | None


class LimitsEntry(TypedDict):
    """The plan's per-provider limit figures (`limits_entry`)."""

    limits: str  # declared | learned
    dimension_seconds: dict[str, float]
    binding_limit: str | None
    suggested_concurrency: Concurrency
    kept_output: NotRequired[KeptOutput]


DIMENSIONS = {
    "rpm": "requests/min",
    "tpm": "tokens/min",
    "itpm": "input tokens/min",
    "otpm": "output tokens/min",
}


def dimension_seconds(
    p: ProviderConfig, requests: float, prompt_tokens: float, output_tokens: float
) -> dict[str, float]:
    """The seconds each of the provider's limits alone needs for this work (only those it has)."""
    lim = p.limits
    work = {
        "rpm": (lim.rpm, requests),
        "tpm": (lim.tpm, prompt_tokens + output_tokens),
        "itpm": (lim.itpm, prompt_tokens),
        "otpm": (lim.otpm, output_tokens),
    }
    return {dim: round(amount / limit * 60.0, 1) for dim, (limit, amount) in work.items() if limit}


def held_seconds(p: ProviderConfig, output_tokens: float, p50: float) -> float | None:
    """Where the provider gives unused output back: the seconds its OTPM needs to hold every
    request's `max_tokens` (`output_tokens` in all) in flight for `p50` seconds (None: no OTPM, or
    a provider that keeps the charge)."""
    otpm = p.limits.otpm
    if not otpm or not p.output_adjusted:
        return None
    return round(output_tokens * p50 / (otpm * HELD_BUCKET_S / 60.0), 1)


def binding(seconds: Mapping[str, float]) -> str | None:
    """The dimension that binds first: the one needing the longest (None: no limit)."""
    return max(seconds, key=lambda d: seconds[d]) if seconds else None


def p50_latency(config: GatewayConfig, p: ProviderConfig, mean_output_tokens: float) -> tuple[float, str]:
    """The provider's P50 latency in seconds and where it comes from (`emulator` or `default`)."""
    if p.emulated and config.emulator is not None:
        entries = config.emulator.get("providers")  # the raw section: checked by the emulator's loader
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("name") == p.name:
                latency = entry.get("latency") or {}
                ms = float(latency.get("ttft_p50_ms", 0.0)) + float(latency.get("per_token_ms", 0.0)) * (
                    mean_output_tokens
                )
                return ms / 1000.0, "emulator"
    return DEFAULT_P50_S, "default"


def suggested_concurrency(
    config: GatewayConfig, p: ProviderConfig, requests: float, output_tokens: float
) -> Concurrency:
    """P50 × RPM / 60 + 20 %, rounded up, with the formula as printed (no RPM: no suggestion)."""
    p50, source = p50_latency(config, p, output_tokens / requests if requests else 0.0)
    rpm = p.limits.rpm
    value: int | None = None
    formula = "no RPM limit: nothing to size it by"
    if rpm:
        raw = p50 * rpm / 60.0 * (1 + HEADROOM)
        value = max(1, math.ceil(raw))
        formula = f"P50 {p50:.2f} s ({source}) × {rpm:g} RPM / 60 + 20% = {raw:.1f} → {value}"
    return {"p50_s": round(p50, 3), "p50_source": source, "rpm": rpm, "value": value, "formula": formula}


def limits_entry(
    config: GatewayConfig, p: ProviderConfig, requests: float, prompt_tokens: float, output_tokens: float
) -> LimitsEntry:
    """The plan's per-provider limit figures: seconds per dimension (output held in flight where
    the provider gives unused output back), the binding one, concurrency, `kept_output`."""
    kept = dimension_seconds(p, requests, prompt_tokens, output_tokens)
    p50 = p50_latency(config, p, output_tokens / requests if requests else 0.0)[0]
    held = held_seconds(p, output_tokens, p50)
    seconds = kept if held is None else kept | {"otpm": held}
    entry: LimitsEntry = {
        "limits": "declared" if p.limits.declared() or p.emulated else "learned",
        "dimension_seconds": seconds,
        "binding_limit": binding(seconds),
        "suggested_concurrency": suggested_concurrency(config, p, requests, output_tokens),
    }
    if held is not None:
        entry["kept_output"] = {"otpm_seconds": kept["otpm"], "binding_limit": binding(kept)}
    return entry


def render_limits(providers: Mapping[str, LimitsEntry]) -> list[str]:
    """Per provider: each dimension's time (the binding one marked) and the suggested concurrency."""
    lines = []
    for name, p in sorted(providers.items()):
        seconds = p["dimension_seconds"]
        if seconds:
            parts = [
                f"{DIMENSIONS[d]} {s:.0f} s" + (" (binds first)" if d == p.get("binding_limit") else "")
                for d, s in seconds.items()
            ]
            lines.append(f"  {name}: " + ", ".join(parts))
            if kept := p.get("kept_output"):
                lines.append(_kept_line(kept))
        elif p.get("limits") == "learned":
            lines.append(f"  {name}: no limits configured: learned from its answers' rate-limit headers")
        else:
            lines.append(f"  {name}: no limits configured")
        if formula := p["suggested_concurrency"]["formula"]:
            lines.append(f"    suggested concurrency: {formula}")
    return lines


def _kept_line(kept: KeptOutput) -> str:
    """The output line of a provider that gives unused output back, with and without the refund."""
    then = kept["binding_limit"]
    binds = "binds first" if then == "otpm" else f"{DIMENSIONS.get(then or '', then)} binds first"
    return (
        "    output tokens/min: the time above holds each max_tokens in flight for one P50 latency"
        " (the output is settled to the real answer when it ends; the answers' own output adds its"
        f" time, unknown before they come); kept at max_tokens: {kept['otpm_seconds']:.0f} s ({binds})"
    )
