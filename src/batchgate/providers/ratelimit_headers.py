"""Reading a provider's rate-limit headers into a `RateLimitSnapshot` (pure, never raises).

OpenAI sends `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` with resets as Go durations
(`6m0s`, `12ms`) or plain seconds (other OpenAI-compatible servers), relayed by a proxy as
`llm_provider-x-ratelimit-*`; Anthropic sends `anthropic-ratelimit-{requests,tokens,input-tokens,
output-tokens}-{limit,remaining,reset}` with resets as RFC 3339 timestamps, turned here into
seconds from `wall_now`. Absent, negative, NaN, infinite or unparsable values become None.

Header mappings from aiohttp are case-insensitive already; any other mapping is lower-cased once.
Duration and timestamp syntax is parsed by `batchgate.policy.hints`, shared with the retry policy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from multidict import CIMultiDict, CIMultiDictProxy

from batchgate.models import RateLimitSnapshot
from batchgate.policy.hints import HINT_PREFIXES, parse_reset, parse_rfc3339_delta

_OPENAI_KINDS = ("requests", "tokens")
_ANTHROPIC_KINDS = (
    ("requests", "requests"),
    ("tokens", "tokens"),
    ("input_tokens", "input-tokens"),
    ("output_tokens", "output-tokens"),
)


def _lookup(headers: Mapping[str, str]) -> Mapping[str, str]:
    if isinstance(headers, CIMultiDictProxy | CIMultiDict):
        return headers
    return {k.lower(): v for k, v in headers.items()}


def parse_count(text: str | None) -> float | None:
    """A finite, non-negative number, or None."""
    if text is None:
        return None
    try:
        value = float(text.strip())
    except (ValueError, AttributeError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_duration(text: str | None) -> float | None:
    """Seconds in a Go duration (`1s`, `6m0s`, `23h47m36.648s`) or plain seconds (`1.5`), or None."""
    if not isinstance(text, str):
        return None
    try:
        value = parse_reset(text)
    except (ValueError, OverflowError):
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def parse_timestamp_delta(text: str | None, wall_now: float) -> float | None:
    """Seconds from `wall_now` (Unix seconds) until an RFC 3339 timestamp, or None."""
    if not isinstance(text, str):
        return None
    try:
        value = parse_rfc3339_delta(text, wall_now)
    except (ValueError, OverflowError, OSError):
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def parse_openai_rate_limits(headers: Mapping[str, str]) -> RateLimitSnapshot:
    """The snapshot from OpenAI-style `x-ratelimit-*` headers (all None when none were sent).

    A proxy in front relays its upstream's as `llm_provider-x-ratelimit-*` (LiteLLM, which sends
    its own limits unprefixed: shared/PROTOCOLS.md, "Servers in front of providers"): per
    kind, the unprefixed group where any of it was sent (the limit nearest us), else the relayed
    one — never a mix of the two."""
    h = _lookup(headers)
    values: dict[str, float | None] = {}
    for kind in _OPENAI_KINDS:
        for prefix in HINT_PREFIXES:
            limit = parse_count(h.get(f"{prefix}x-ratelimit-limit-{kind}"))
            remaining = parse_count(h.get(f"{prefix}x-ratelimit-remaining-{kind}"))
            reset = parse_duration(h.get(f"{prefix}x-ratelimit-reset-{kind}"))
            if limit is not None or remaining is not None or reset is not None:
                break
        values[f"limit_{kind}"], values[f"remaining_{kind}"] = limit, remaining
        values[f"reset_{kind}"] = reset
    return RateLimitSnapshot(**values)


def parse_anthropic_rate_limits(headers: Mapping[str, str], wall_now: float) -> RateLimitSnapshot:
    """The snapshot from `anthropic-ratelimit-*` headers; resets in seconds from `wall_now`."""
    h = _lookup(headers)
    values: dict[str, float | None] = {}
    for field, kind in _ANTHROPIC_KINDS:
        prefix = f"anthropic-ratelimit-{kind}"
        values[f"limit_{field}"] = parse_count(h.get(f"{prefix}-limit"))
        values[f"remaining_{field}"] = parse_count(h.get(f"{prefix}-remaining"))
        values[f"reset_{field}"] = parse_timestamp_delta(h.get(f"{prefix}-reset"), wall_now)
    return RateLimitSnapshot(**values)
