"""How an emulated provider enforces, charges and reports its quota: the value objects and the
checked reading of the `enforcement`, `charge` and `headers` keys of a provider's config.

Real providers differ on each axis, so each is a choice:
- `enforcement`: `token_bucket` (continuous refill; `burst_seconds` of limit in the bucket),
  `sliding_window` or `fixed_window` (`window_seconds`): how a per-minute limit is enforced.
  Written as a name (`sliding_window`) or a mapping (`{kind: sliding_window, window_seconds: 10}`);
  without seconds, the emulator's top-level `window_seconds`.
- `charge`: what a request costs at admission — `exact` tokens of the prompt, or an estimate from
  its characters (`{chars_per_token: 4}`), plus `max_tokens × n` either way. `usage` is always exact.
- `output_charge`: what becomes of the output part of that charge when the answer ends —
  `max_tokens` (kept: the charge stays at `max_tokens × n`, as OpenAI's limiter is reported to
  keep it) or `adjusted` (Anthropic's documented rule, shared/PROTOCOLS.md "How quotas are
  charged": "OTPM is estimated from `max_tokens` when a request starts and adjusted to the real
  output when it ends" — the unused part goes back to the output and total-token limiters).
  Where a provider's rule is unknown, run both.
- `neighbours`: other work on the same key (another job, another team's service) that takes a
  `share` of every limit from `from` to `until` seconds after the start (all along by default)
  without changing the limits the headers report: only `remaining` and 429s show it
  (shared/PROTOCOLS.md, "Other work on the same key").
- `headers`: `minute` (remaining on the per-minute scale, reset = time until full), `window`
  (remaining of the current short window) or `none` (no rate-limit headers at all; a quota 429
  still carries `retry-after`, a retry hint rather than a rate-limit header).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from batchgate.errors import ConfigError

EnforcementKind = Literal["token_bucket", "sliding_window", "fixed_window"]
HeaderStyle = Literal["minute", "window", "none"]
OutputCharge = Literal["max_tokens", "adjusted"]
ENFORCEMENTS: tuple[str, ...] = ("token_bucket", "sliding_window", "fixed_window")
HEADER_STYLES: tuple[str, ...] = ("minute", "window", "none")
OUTPUT_CHARGES: tuple[str, ...] = ("max_tokens", "adjusted")
MAX_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Enforcement:
    """The algorithm and its length: the bucket's burst or the window, in seconds (None: the default)."""

    kind: EnforcementKind = "token_bucket"
    seconds: float | None = None

    def resolved(self, default_seconds: float) -> Enforcement:
        """This enforcement with its seconds filled in from the emulator's `window_seconds`."""
        return self if self.seconds is not None else Enforcement(self.kind, default_seconds)

    @property
    def length(self) -> float:
        if self.seconds is None:
            raise ValueError("the enforcement's seconds are not resolved")
        return self.seconds


@dataclass(frozen=True, slots=True)
class Charge:
    """What admission charges for the prompt: exact tokens (None) or characters ÷ `chars_per_token`."""

    chars_per_token: float | None = None

    @property
    def exact(self) -> bool:
        return self.chars_per_token is None


def read_enforcement(value: Any, source: str, key: str) -> Enforcement:
    """`token_bucket` | `sliding_window` | `fixed_window`, or a mapping with `kind` and its seconds."""
    if value is None:
        return Enforcement()
    if isinstance(value, str):
        return Enforcement(_kind(value, source, key))
    if not isinstance(value, Mapping):
        raise ConfigError(source, key, f"must be one of {', '.join(ENFORCEMENTS)} or a mapping with 'kind'")
    kind = _kind(value.get("kind"), source, f"{key}.kind")
    seconds_key = "burst_seconds" if kind == "token_bucket" else "window_seconds"
    for k in value:
        if k not in ("kind", seconds_key):
            raise ConfigError(source, f"{key}.{k}", f"unknown key (allowed for {kind}: kind, {seconds_key})")
    raw = value.get(seconds_key)
    if raw is None:
        return Enforcement(kind)
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 < raw <= MAX_SECONDS:
        raise ConfigError(source, f"{key}.{seconds_key}", f"must be a number in (0, 60], got {raw!r}")
    return Enforcement(kind, float(raw))


def _kind(value: Any, source: str, key: str) -> EnforcementKind:
    if value == "token_bucket":
        return "token_bucket"
    if value == "sliding_window":
        return "sliding_window"
    if value == "fixed_window":
        return "fixed_window"
    raise ConfigError(source, key, f"must be one of {', '.join(ENFORCEMENTS)}, got {value!r}")


def read_charge(value: Any, source: str, key: str) -> Charge:
    """`exact`, or `{chars_per_token: N}` with N > 0."""
    if value is None or value == "exact":
        return Charge()
    if not isinstance(value, Mapping) or set(value) != {"chars_per_token"}:
        raise ConfigError(source, key, f"must be 'exact' or {{chars_per_token: N}}, got {value!r}")
    cpt = value["chars_per_token"]
    if isinstance(cpt, bool) or not isinstance(cpt, int | float) or cpt <= 0:
        raise ConfigError(source, f"{key}.chars_per_token", f"must be a number > 0, got {cpt!r}")
    return Charge(float(cpt))


def read_headers(value: Any, source: str, key: str) -> HeaderStyle:
    """`minute` (the default), `window` or `none`."""
    if value is None or value == "minute":
        return "minute"
    if value == "window":
        return "window"
    if value == "none":
        return "none"
    raise ConfigError(source, key, f"must be one of {', '.join(HEADER_STYLES)}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Neighbour:
    """Other traffic on the key: `share` of every limit, taken from `start` to `end` seconds."""

    share: float
    start: float = 0.0
    end: float = math.inf

    def seconds_active(self, since: float, now: float) -> float:
        """Seconds of [since, now] (from the start) during which this neighbour takes its share."""
        return max(0.0, min(now, self.end) - max(since, self.start))


def read_neighbours(value: Any, source: str, key: str) -> tuple[Neighbour, ...]:
    """A list of `{share: (0, 1), from?: seconds, until?: seconds}`."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(source, key, "must be a list of {share, from, until}")
    out = []
    for i, item in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(item, Mapping) or not set(item) <= {"share", "from", "until"}:
            raise ConfigError(source, where, "must be a mapping with share and optionally from, until")
        share, start, end = item.get("share"), item.get("from", 0.0), item.get("until", math.inf)
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share < 1:
            raise ConfigError(source, f"{where}.share", f"must be a number in (0, 1), got {share!r}")
        for name, v in (("from", start), ("until", end)):
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise ConfigError(source, f"{where}.{name}", f"must be seconds >= 0, got {v!r}")
        if end <= start:
            raise ConfigError(source, f"{where}.until", "must be after from")
        out.append(Neighbour(float(share), float(start), float(end)))
    return tuple(out)


def read_output_charge(value: Any, source: str, key: str) -> OutputCharge:
    """`max_tokens` (the default: the output charge is kept) or `adjusted` (to the real output)."""
    if value is None or value == "max_tokens":
        return "max_tokens"
    if value == "adjusted":
        return "adjusted"
    raise ConfigError(source, key, f"must be one of {', '.join(OUTPUT_CHARGES)}, got {value!r}")


def text_chars(body: Mapping[str, Any]) -> int:
    """Characters of every text in a body: a chat body's messages' contents and top-level
    `system`; the other OpenAI endpoints' `input`, `instructions` and `prompt` (PROTOCOLS.md)."""
    total = _chars(body.get("system")) + _chars(body.get("instructions")) + _chars(body.get("prompt"))
    for key in ("messages", "input"):
        items = body.get(key)
        if isinstance(items, str):
            total += len(items)
        elif isinstance(items, list):
            for item in items:
                if isinstance(item, str):
                    total += len(item)
                elif isinstance(item, Mapping):
                    total += _chars(item.get("content"))
    return total


def _chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            len(part) if isinstance(part, str) else len(part["text"])
            for part in content
            if isinstance(part, str) or (isinstance(part, Mapping) and isinstance(part.get("text"), str))
        )
    return 0
