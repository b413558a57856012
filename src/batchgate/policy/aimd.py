"""AIMD: how far below its declared rate a provider should be driven, as a factor in (0, 1].

A 429 cuts the factor multiplicatively; each clean period (no 429 for `clean_period` seconds)
restores it additively. Damping, twice: after a cut, further 429s within `cooldown` seconds do not
cut again — they are usually answers to requests sent before the cut, and counting them would
collapse throughput after a single burst; and 429s that stay at most `noise_ratio` of the recent
answers (exponentially decayed over `noise_window` seconds) are noise, not a verdict on the rate —
a provider that sheds a few % of requests at random must not be driven to the floor. Recovery is
careful near the factor that last provoked a cut: increases stop one step below it, and only after
`probe_period` seconds without a cut does the factor probe past it again, so a provider whose real
limit lies below the declared one settles just under that limit instead of overshooting every few
seconds. The provider's own word on its bucket (`on_room`: what its `remaining` headers show
left) moves the factor faster than either: up at once while there is room to spare, back before
a 429 when a step used it up, and no additive increase while there is none; once it has shown a
bucket (room while we send at the rate), its level draining or climbing while requests wait is
others taking capacity or giving it back, followed before any 429 (a steady neighbour is learned
as a lower rate, not fought with 429s). Pure: the caller passes the time in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AimdSettings:
    decrease: float = 0.7  # factor multiplier on a (non-damped) 429
    increase: float = 0.05  # fraction of the declared rate restored per clean period
    clean_period: float = 2.0  # seconds without a 429 that earn one increase
    min_factor: float = 0.1
    cooldown: float = 1.0  # after a cut, 429s within this many seconds do not cut again
    noise_ratio: float = 0.05  # 429s up to this share of recent answers are noise
    noise_window: float = 10.0  # seconds over which that share decays
    probe_period: float = 30.0  # seconds without a cut before the factor may pass the last cut point
    prior_answers: float = 0.0  # clean answers assumed before the first: one early 429 is noise too
    room_full: float = 0.75  # a provider reporting this share of its bucket left has room to spare
    room_none: float = 0.3  # ... at most this share left: no room (no additive increase)
    room_step: float = 0.15  # fraction of the declared rate added per piece of evidence of room
    room_settle: float = 0.5  # seconds between two steps (and after a 429) for the bucket to show it
    room_proof: float = 1.0  # seconds of room reported while we send at the rate: a bucket, not a window
    room_trend: float = 0.15  # shares of its bucket per second it fills or drains by: room freed or taken
    room_move: float = 0.5  # the most one trend moves the factor by
    room_gain: float = 0.7  # the share of a level rising below `room_full` followed at once (its
    # headers lag our sending: all of it overshoots); a draining or nearly full one is followed whole
    room_jump: float = 0.5  # a level this much higher within `room_jump_s`: a window restarting
    room_jump_s: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 < self.decrease <= 1.0:
            raise ValueError("decrease must be in (0, 1]")
        if self.increase < 0 or self.clean_period <= 0 or self.cooldown < 0 or self.probe_period < 0:
            raise ValueError("increase, cooldown and probe_period must be >= 0, clean_period > 0")
        if not 0.0 < self.min_factor <= 1.0:
            raise ValueError("min_factor must be in (0, 1]")
        if not 0.0 <= self.noise_ratio < 1.0 or self.noise_window <= 0:
            raise ValueError("noise_ratio must be in [0, 1) and noise_window positive")


class AimdController:
    """The live factor of one provider's rate; see the module docstring."""

    def __init__(self, settings: AimdSettings | None = None) -> None:
        self.settings = settings or AimdSettings()
        self.factor = 1.0
        self.cuts = 0
        self.increases = 0
        self.rate_limited = 0
        self._last_cut = -math.inf
        self._last_rate_limited = -math.inf
        self._last_increase = -math.inf
        self._ceiling = math.inf  # the factor at which the last cut happened
        self._blind: tuple[float, float] | None = None  # (factor, ceiling) before cuts made blind
        self._recent_429 = 0.0  # decayed counts of recent answers
        self._recent_all = self.settings.prior_answers
        self._recent_at = -math.inf
        self._room_at = -math.inf  # the last step taken on the provider's word
        self._room_good: float | None = None  # the factor before that step (its bucket was full)
        self._no_room = False  # the provider's bucket last showed no room: no additive increase
        self._fill: float | None = None  # what the provider last reported left of its bucket
        self.room_trusted = True  # False once a 429 came while it reported room: its headers lie
        # Room reported for `room_proof` seconds while we sent at the rate: the provider holds a
        # bucket whose level others move (a window we fill ourselves never shows room for long).
        self.bucket_seen = False
        self.window_seen = False  # its level leapt back to full at once: windows, never a bucket
        self._room_since: float | None = None
        self._last: tuple[float, float] | None = None  # (fill, when) of the last report
        self._ref: tuple[float, float] | None = None  # (fill, when) at the last settle point

    def _observe(self, now: float, rate_limited: bool) -> float:
        """Add one answer to the decayed counts; the share of 429s among them."""
        if now > self._recent_at:
            if self._recent_at > -math.inf:  # the prior is not decayed away before the first answer
                keep = math.exp(-(now - self._recent_at) / self.settings.noise_window)
                self._recent_429 *= keep
                self._recent_all *= keep
            self._recent_at = now
        self._recent_all += 1.0
        self._recent_429 += 1.0 if rate_limited else 0.0
        return self._recent_429 / self._recent_all

    def on_rate_limited(
        self, now: float, admitted_at: float = -math.inf, *, blind: bool = False, refuted: bool = False
    ) -> bool:
        """Record a 429 for a request admitted at `admitted_at`; True when it cut the factor
        (False when damped, noise or at the floor). The cooldown damps only 429s for requests
        admitted before the last cut: one admitted since was sent at the cut rate, and is a
        verdict on it. `blind`: no usage was in yet to say whether the charge, not the rate, is
        at fault — such cuts can be undone together (`excuse_blind`) until a cut that is not.
        `refuted`: the 429's own headers showed the bucket with room to spare — the provider
        enforces less than it reports, so the 429 is a verdict on the rate, never noise (taken as
        noise, the requests already admitted at that rate come back refused too)."""
        s = self.settings
        self.rate_limited += 1
        if refuted or (self._fill is not None and self._fill >= s.room_full):
            self.room_trusted = self._no_room = False  # it reported room, then refused: not evidence
        verdict = refuted or (self.bucket_seen and self._fill is not None and self._fill <= s.room_none)
        if self._observe(now, rate_limited=True) <= s.noise_ratio and not verdict:
            return False  # noise, unless its bucket was seen emptied: then others took the room
        self._last_rate_limited = now
        if now - self._last_cut < s.cooldown and admitted_at <= self._last_cut:
            return False
        new = max(s.min_factor, self.factor * s.decrease)
        self._last_cut = now
        if new >= self.factor:
            return False
        self._blind = (self._blind or (self.factor, self._ceiling)) if blind else None
        self._ceiling = self.factor
        self.factor = new
        self.cuts += 1
        return True

    def excuse_blind(self) -> bool:
        """Undo the cuts made blind (see `on_rate_limited`), now that usage explains them; True
        if the factor rose."""
        if self._blind is None:
            return False
        (factor, ceiling), self._blind = self._blind, None
        if factor <= self.factor:
            return False
        self.factor, self._ceiling = factor, ceiling
        return True

    def on_success(self, now: float) -> bool:
        """Record a success; True when a clean period has passed and the factor went up."""
        self._observe(now, rate_limited=False)
        if self.factor >= 1.0:
            return False
        s = self.settings
        if self._no_room:
            return False
        clean_since = max(self._last_rate_limited, self._last_increase)
        if now - clean_since < s.clean_period:
            return False
        new = self.factor + s.increase
        new = 1.0 if new > 1.0 - 1e-9 else new
        if new >= self._ceiling - 1e-12 and now - self._last_cut < s.probe_period:
            return False  # hold one step below the rate that was too much, for a while
        self.factor = new
        self._last_increase = now
        self.increases += 1
        return True

    def on_room(self, now: float, fill: float, *, busy: bool = False, grain: float = 0.0) -> bool:
        """The provider's headers say its bucket is `fill` full (0..1) while we do (`busy`) or do
        not have requests waiting; True if the factor moved. `grain`: one average request's share
        of a second of the limit — a level that moved by a request or two says nothing.

        Full while the factor is below 1: we send below what is left to us (the 429s that cut it
        were another's traffic that has gone, or a limit that came back) — step up at once, past
        the last cut point, every `room_settle` seconds while it stays full. Emptied right after
        such a step: the step went past what is left (a steady neighbour) — back to the factor
        before it, before any 429. No room at all: no additive increase until there is. Once its
        bucket has shown room while we sent at the rate (`bucket_seen`), a level that drains or
        fills while we wait to send is others taking capacity or giving it back: the factor
        follows by as much (a second's bucket), before a 429 and without waiting to be full. A
        429 that comes while the last report showed room (headers that report more than is
        enforced) makes them no evidence from then on."""
        s = self.settings
        self._fill = fill
        if not self.room_trusted:
            return False
        self._no_room = fill <= s.room_none
        self._prove_bucket(now, fill, busy)
        if now - max(self._room_at, self._last_rate_limited) < s.room_settle:
            return False
        trend = self._trend(fill, now)
        if fill >= s.room_full and self.factor < 1.0:
            self._room_good, self._room_at = self.factor, now
            self.factor = min(1.0, self.factor + max(s.room_step, trend))
            self._ceiling = max(self._ceiling, self.factor)
            self._last_increase = now
            return True
        if self._no_room and self._room_good is not None and self._room_good < self.factor:
            self.factor, self._room_good, self._room_at = self._room_good, None, now
            return True
        trend = trend * (s.room_gain if trend > 0 else 1.0) if self.bucket_seen and busy else 0.0
        if abs(trend) < max(s.room_trend, 2 * grain / s.room_settle) or (trend > 0 and self.factor >= 1.0):
            return False
        self._room_good, self._room_at = None, now
        self.factor = min(1.0, max(s.min_factor, self.factor + trend))
        if trend > 0:
            self._ceiling = max(self._ceiling, self.factor)
            self._last_increase = now
        return True

    def _prove_bucket(self, now: float, fill: float, busy: bool) -> None:
        """Room reported all along for `room_proof` seconds while we had requests waiting at a
        factor near 1: a bucket others can drain, not a window we fill ourselves within its
        length (see `bucket_seen`). A level that leaps up faster than any bucket refills is a
        fixed window restarting: its level says nothing about others, ever."""
        s, last, self._last = self.settings, self._last, (fill, now)
        if last is not None and fill - last[0] >= s.room_jump and now - last[1] <= s.room_jump_s:
            self.window_seen, self.bucket_seen = True, False
        if self.window_seen or fill <= s.room_none or not busy or self.factor < 0.9:
            self._room_since = None
        elif self._room_since is None:
            self._room_since = now
        elif now - self._room_since >= self.settings.room_proof:
            self.bucket_seen = True

    def _trend(self, fill: float, now: float) -> float:
        """How fast the level moved over the last `room_settle` or more (shares of the bucket per
        second, bounded; 0 within a settle period, or after a gap too long to say)."""
        s, ref = self.settings, self._ref
        if ref is not None and now - ref[1] < s.room_settle:
            return 0.0
        self._ref = (fill, now)
        if ref is None or now - ref[1] > 4 * s.room_settle:
            return 0.0
        return max(-s.room_move, min(s.room_move, (fill - ref[0]) / (now - ref[1])))

    def new_scale(self) -> None:
        """The provider's reported limits changed (its tier moved): a share of the new limit is no
        measure against one of the old (half the bucket left of a limit that doubled is as much
        room as a whole bucket before), so the level's trend and jump start again from the next
        report instead of reading the change of scale as others draining or giving back."""
        self._ref = self._last = None

    def rescale(self, ratio: float) -> None:
        """Multiply the factor by `ratio` (capped to [min_factor, 1]).

        Used when a provider's headers reveal a lower limit: the cuts that the lower limit
        explains are undone, so the effective rate does not drop twice for one cause.
        """
        if ratio <= 0 or not math.isfinite(ratio):
            raise ValueError(f"ratio must be positive and finite, got {ratio}")
        self.factor = min(1.0, max(self.settings.min_factor, self.factor * ratio))
        self._ceiling *= ratio

    def __repr__(self) -> str:
        return (
            f"AimdController(factor={self.factor:.3f}, cuts={self.cuts}, "
            f"increases={self.increases}, rate_limited={self.rate_limited})"
        )
