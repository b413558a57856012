"""Parsing what providers say in headers: retry hints, `x-should-retry`, durations and resets.

Pure functions over a header mapping (a plain dict in any letter case, or a CIMultiDict).
Nothing here trusts a header: negative, NaN, infinite or unparsable values give None, and retry
hints are capped at `max_hint`, so a garbage `retry-after: 86400` can never become a day's sleep.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime

_PAST_DATE_SLACK = 5.0  # an HTTP date up to this far in the past means "now" (clock skew)
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header `name`, looked up case-insensitively; None when absent."""
    value = headers.get(name)
    if value is None:
        lowered = name.lower()
        for key, candidate in headers.items():
            if key.lower() == lowered:
                value = candidate
                break
    return value.strip() if isinstance(value, str) else None


def _finite_non_negative(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value


HINT_PREFIXES = ("", "llm_provider-")  # a proxy in front (LiteLLM) relays the upstream's headers prefixed
_RESET_KINDS = ("requests", "tokens")


def parse_retry_hint(headers: Mapping[str, str], wall_now: float, *, max_hint: float = 60.0) -> float | None:
    """Seconds the provider asks us to wait, or None when it gave no usable hint.

    `retry-after-ms` wins, then `retry-after` as seconds, then `retry-after` as an HTTP date
    (relative to `wall_now`, Unix seconds); then the same relayed by a proxy in front
    (`llm_provider-retry-after`: LiteLLM's own 429 sends only that, its upstream's come back so
    prefixed, shared/PROTOCOLS.md "Servers in front of providers"); then, where a limit's
    `x-ratelimit-remaining-*` (or its `llm_provider-` relay) is 0, its `x-ratelimit-reset-*` in
    seconds or a duration (`1m30s`, `6ms`). Values above `max_hint` are capped to it; a
    `max_hint` of 0 means the user takes no hint at all (None: the own backoff applies, never
    an immediate retry of everything the provider asked to hold back).
    """
    if max_hint <= 0:
        return None
    value: float | None = None
    for prefix in HINT_PREFIXES:
        value = _retry_after(headers, prefix, wall_now)
        if value is not None:
            break
    if value is None:
        value = _exhausted_reset(headers)
    if value is None:
        return None
    return min(value, max_hint)


def _retry_after(headers: Mapping[str, str], prefix: str, wall_now: float) -> float | None:
    """`{prefix}retry-after-ms`, else `{prefix}retry-after` (seconds or an HTTP date)."""
    ms = header(headers, f"{prefix}retry-after-ms")
    if ms is not None and (parsed := _finite_non_negative(ms)) is not None:
        return parsed / 1000.0
    text = header(headers, f"{prefix}retry-after")
    if text is None:
        return None
    value = _finite_non_negative(text)
    return _http_date_delta(text, wall_now) if value is None else value


def _exhausted_reset(headers: Mapping[str, str]) -> float | None:
    """The longest `x-ratelimit-reset-*` of a limit whose remaining is 0 (prefixed or not)."""
    found: float | None = None
    for prefix in HINT_PREFIXES:
        for kind in _RESET_KINDS:
            remaining = header(headers, f"{prefix}x-ratelimit-remaining-{kind}")
            if remaining is None or _finite_non_negative(remaining) != 0.0:
                continue
            reset = header(headers, f"{prefix}x-ratelimit-reset-{kind}")
            seconds = parse_reset(reset) if reset is not None else None
            if seconds is not None:
                found = seconds if found is None else max(found, seconds)
    return found


def parse_reset(text: str) -> float | None:
    """A reset as providers send it: plain seconds (`1.5`) or a Go duration (`1m30s`, `6ms`)."""
    value = _finite_non_negative(text.strip())
    return value if value is not None else parse_go_duration(text)


def _http_date_delta(text: str, wall_now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        delta = when.timestamp() - wall_now
    except (OverflowError, OSError):
        return None
    if not math.isfinite(delta) or delta < -_PAST_DATE_SLACK:
        return None
    return max(0.0, delta)


def parse_should_retry(headers: Mapping[str, str]) -> bool | None:
    """`x-should-retry: true|false` as a bool; None when absent or neither word."""
    value = header(headers, "x-should-retry")
    if value is None:
        return None
    lowered = value.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


def parse_go_duration(text: str) -> float | None:
    """Seconds in a Go duration such as `1s`, `6m0s`, `12ms`, `23h47m36.648s` (None if invalid)."""
    text = text.strip()
    if text == "0":
        return 0.0
    if not text:
        return None
    total, pos = 0.0, 0
    while pos < len(text):
        match = _GO_PART.match(text, pos)
        if match is None:
            return None
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        pos = match.end()
    return total if math.isfinite(total) else None


def parse_rfc3339_delta(text: str, wall_now: float) -> float | None:
    """Seconds from `wall_now` until the RFC 3339 timestamp `text` (0 if past, None if invalid)."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        delta = when.timestamp() - wall_now
    except (OverflowError, OSError):
        return None
    return max(0.0, delta) if math.isfinite(delta) else None
