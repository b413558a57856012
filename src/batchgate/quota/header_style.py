"""What a provider's `remaining` headers mean, and following them where they say what is left.

Providers report remaining quota differently: on the per-minute scale with reset = time until
full ("minute": an idle provider shows nearly its whole limit remaining), as the remaining of the
current short window ("window": never more than a short window's allowance, a small part of the
per-minute limit), or not at all. A short-window remaining read as minute capacity would look
like a nearly empty bucket, so the style is decided before any remaining is used:

- any dimension ever showing more than half its per-minute limit remaining → "minute" (for good);
- otherwise, once headers have been seen → "window".

"minute": a remaining far below our own level lowers the level to match, never raises it. The
provider's fraction left is taken of what it surely admits at once — at least one `MIN_WINDOW` of
its limit, or our bucket if that is bigger: our bucket holds only the burst we have earned (a small
part of a second, at first), so the same fraction of it would empty it whenever a busy provider's
short window shows a few percent left, wasting the rate the pace had counted on. "window": the
remaining is in the provider's own units of what may be admitted now, so a level above it comes down
to it. Neither raises a level: how a short window frees its allowance again depends on its algorithm
(a sliding window frees a burst only a whole window later, a token bucket continuously), so a
remaining seen now says nothing safe about sending more than our own pacing allows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from batchgate.models import RateLimitSnapshot
from batchgate.quota.dimension import MIN_WINDOW, Dimension

Style = Literal["unknown", "minute", "window"]
MINUTE_SHARE = 0.5
_FAR_BELOW = 0.25  # minute style lowers our level when the provider's is this fraction of a bucket lower
_NAMES = ("requests", "tokens", "input_tokens", "output_tokens")


class HeaderStyle:
    """One provider's header style, learned from what it reports; see the module docstring."""

    __slots__ = ("_limits", "style")

    def __init__(self) -> None:
        self.style: Style = "unknown"
        self._limits: dict[str, float] = {}  # the limits last reported, per dimension

    def rescaled(self, dims: Mapping[str, Dimension], snapshot: RateLimitSnapshot) -> bool:
        """Whether `snapshot` reports a limit of one of `dims` other than the one last reported
        (the tier moved: a share of `remaining` now measures against another whole). Only our
        dimensions: Anthropic's `tokens` reports whichever of its buckets is tightest, and flips."""
        moved = False
        for name in dims:
            limit = getattr(snapshot, f"limit_{name}")
            if limit is not None and math.isfinite(limit):
                moved = moved or self._limits.get(name, limit) != limit
                self._limits[name] = limit
        return moved

    def observe(self, snapshot: RateLimitSnapshot) -> Style:
        seen = False
        for name in _NAMES:
            limit = getattr(snapshot, f"limit_{name}")
            remaining = getattr(snapshot, f"remaining_{name}")
            if remaining is None or not math.isfinite(remaining):
                continue
            seen = True
            if limit is not None and remaining > MINUTE_SHARE * limit:
                self.style = "minute"
        if seen and self.style == "unknown":
            self.style = "window"
        return self.style

    def follow(self, dims: Mapping[str, Dimension], snapshot: RateLimitSnapshot, now: float) -> bool:
        """Move our buckets' levels as the provider's remaining says; True if one changed."""
        if self.observe(snapshot) == "unknown":
            return False
        changed = False
        for name, dim in dims.items():
            bucket = dim.bucket
            remaining = getattr(snapshot, f"remaining_{name}")
            if remaining is None or not math.isfinite(remaining):
                continue
            if self.style == "window":
                if remaining < bucket.level(now):
                    bucket.set_level(remaining, now)
                    changed = True
                continue
            reported = getattr(snapshot, f"limit_{name}") or dim.limit
            at_once = max(bucket.capacity, dim.limit / 60.0 * MIN_WINDOW)
            target = max(0.0, min(1.0, remaining / reported)) * at_once
            if target < bucket.level(now) - _FAR_BELOW * bucket.capacity:
                bucket.set_level(target, now)
                changed = True
        return changed

    def __repr__(self) -> str:
        return f"HeaderStyle({self.style})"
