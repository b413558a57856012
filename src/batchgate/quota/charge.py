"""What a provider charges for a prompt, learned per provider and per token dimension.

We count every prompt cheaply ourselves (`batchgate.tokens.CharCounter`: UTF-8 bytes ÷ 4 plus
framing); what the provider charges is some multiple of that count, and the multiple differs:
one provider charges exact tokens (fewer than our count on English prose, more on code or CJK),
another estimates from characters like we do. So the reservation for a prompt is

    factor(dimension) × our count,   factor = usage ratio × margin(dimension)

- the usage ratio is Σ reported prompt tokens ÷ Σ our counts, over the answers so far (weighted
  toward the recent; before any answer, our count is taken as is);
- the margin (≥ 1) covers providers that charge more than they report in `usage` (an estimate
  from characters, say). A 429 the provider attributes to a token dimension (the `error.type`
  OpenAI sends, or the dimension its headers show nearly empty) is the evidence — once a second
  one follows within `confirm` seconds (a lone 429 is noise): the first confirmed pair lifts it to
  the hypothesis "it charges what we count" (1 ÷ usage ratio), later ones by `raise_by` (once per
  `cooldown`, up to one step past that hypothesis — a provider charging still more is a rate
  problem, for AIMD); it relaxes back toward 1 by `relax_by` every `relax_period` without one.
  A relaxation is a probe: a step of 0.4%, less than the half-percent of jitter allowance the
  window log keeps, so a wrong first step overruns no window; a 429 on that dimension for a
  request admitted after a step, within its period, refutes it alone — the step is undone at
  once and that margin's period doubles — and a 429 pair lifts it back to the hypothesis, not past.

`charged(dim, reported, count)` turns a reported prompt count into what we believe was charged
(our count's reservation, while a margin says the provider charges by a count like ours), so a
reservation is settled against the same scale it was reserved on. Pure: time is passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from batchgate.models import Cost, RateLimitSnapshot
from batchgate.quota.limits import Outcome

PROMPT_DIMENSIONS = ("tokens", "input_tokens")
_LEARNED_SINCE = 0.05  # a reservation this much below today's factor was priced before it was learned
_NO_HEADERS = RateLimitSnapshot()
EMPTY = 0.25  # headers showing a dimension at most this full name it as the one a 429 was about
ROOM_FULL, ROOM_NONE = 0.9, 0.3  # headers showing a dimension this full: room to spare / none
_ERROR_TYPES = {
    "tokens": "tokens",
    "requests": "requests",
    "input_tokens": "input_tokens",
    "input tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "output tokens": "output_tokens",
}


@dataclass(frozen=True, slots=True)
class ChargeSettings:
    memory: float = 200.0  # answers over which the usage ratio is averaged (exponential weight)
    raise_by: float = 1.15
    max_margin: float = 2.5
    cooldown: float = 1.0
    confirm: float = 5.0
    relax_by: float = 1.004  # below the window log's 0.5% jitter allowance: a wrong step costs no 429
    relax_period: float = 10.0  # doubles for a margin each time a step is refuted

    def __post_init__(self) -> None:
        if self.memory < 1 or self.raise_by < 1 or self.max_margin < 1 or self.relax_by < 1:
            raise ValueError("memory, raise_by, max_margin and relax_by must be at least 1")
        if self.cooldown < 0 or self.relax_period <= 0:
            raise ValueError("cooldown must be >= 0 and relax_period positive")


class _Margin:
    __slots__ = ("before_relax", "last_429", "last_event", "last_raise", "period", "ratio_at_raise", "value")

    def __init__(self, period: float) -> None:
        self.value = 1.0
        self.ratio_at_raise = 1.0  # the usage ratio when the margin was last raised
        self.last_raise = -math.inf
        self.last_event = -math.inf
        self.last_429 = -math.inf
        self.period = period  # seconds without a 429 before the next relaxation
        self.before_relax: tuple[float, float] | None = None  # (when, value) of the last step


class ChargeModel:
    """One provider's learned prompt charges; see the module docstring."""

    def __init__(self, settings: ChargeSettings | None = None) -> None:
        self.settings = settings or ChargeSettings()
        self._counted = 0.0  # decayed Σ our counts
        self._reported = 0.0  # decayed Σ reported prompt tokens
        self._margins = {d: _Margin(self.settings.relax_period) for d in PROMPT_DIMENSIONS}
        self.samples = 0
        self.raises = 0
        self._blind: dict[str, float] = {}  # dim -> lowest reservation of a 429 before any usage

    @property
    def usage_ratio(self) -> float:
        if self._counted <= 0:
            return 1.0
        return self._reported / self._counted

    def margin(self, dim: str) -> float:
        m = self._margins.get(dim)
        return 1.0 if m is None else m.value

    def factor(self, dim: str) -> float:
        """Provider charge per unit of our count on `dim`."""
        return self.usage_ratio * self.margin(dim)

    def reserve(self, dim: str, count: int) -> int:
        """The prompt charge to reserve on `dim` for a prompt we counted at `count`."""
        return math.ceil(count * self.factor(dim)) if count > 0 else 0

    def priced(self, cost: Cost, count: int) -> Cost:
        """`cost` (prompt + output on `tokens`) with its prompt parts re-estimated from our `count`
        (`reserve` on both prompt dimensions, the usage ratio worked out once: every request is
        priced here, on its way to the pool, twice)."""
        prompt = inputs = 0
        if count > 0:
            ratio = self.usage_ratio
            margins = self._margins
            prompt = math.ceil(count * (ratio * margins["tokens"].value))
            inputs = math.ceil(count * (ratio * margins["input_tokens"].value))
        tokens = prompt + cost.output_tokens
        if cost.tokens == tokens and cost.input_tokens == inputs:
            return cost  # priced so already (the pool re-prices what the scheduler just priced)
        return Cost(
            requests=cost.requests,
            tokens=tokens,
            input_tokens=inputs,
            output_tokens=cost.output_tokens,
        )

    def charged(self, dim: str, reported: int, count: int | None = None) -> int:
        """What the provider charged on `dim` for a prompt it reported as `reported` tokens and we
        counted at `count`. With no margin, what it reported. With one, the provider is believed to
        charge by a count like ours (its 429s said it charges more than it reports): what the model
        reserves for `count` — not `reported` × margin, whose per-prompt spread (the reported count
        varies around the ratio) would only add noise to every window."""
        margin = self.margin(dim)
        if margin > 1.0 and count is not None and count > 0:
            return self.reserve(dim, count)
        return math.ceil(reported * margin) if reported > 0 else 0

    def observe_usage(self, count: int, reported: int, now: float) -> None:
        """Learn from one answer: our count of its prompt and the prompt tokens the provider reported."""
        if count <= 0 or reported <= 0:
            return
        keep = 1.0 - 1.0 / self.settings.memory
        self._counted = self._counted * keep + count
        self._reported = self._reported * keep + reported
        self.samples += 1
        ratio = self.usage_ratio
        for m in self._margins.values():
            if m.value > 1.0 and ratio != m.ratio_at_raise:  # the factor learned holds, not the margin:
                # usage that rises explains part of it, and usage that falls back (its noise) must
                # not ratchet it down — the factor moves only by 429s and relaxations
                m.value = min(self.settings.max_margin, max(1.0, m.value * m.ratio_at_raise / ratio))
                m.ratio_at_raise = ratio
            if m.value > 1.0 and now - max(m.last_event, m.last_raise) >= m.period:
                m.before_relax = (now, m.value)
                m.value = max(1.0, m.value / self.settings.relax_by)
                m.last_event = now

    def on_rate_limited(
        self, dim: str | None, now: float, admitted_at: float = math.inf, reserved: float | None = None
    ) -> bool:
        """A 429 attributed to `dim` for a request admitted at `admitted_at`, reserved at
        `reserved` per unit of our count; True when the charge model accounts for it: it raised
        that dimension's margin, or the request was reserved under a lower factor than the model
        now gives (a margin since raised, or a usage ratio learned since — what was sent before
        the first answers, say). A lone one, one before any usage was seen, or one past what
        charges explain (one step beyond "charges what we count"), is left to the rate's AIMD."""
        m = self._margins.get(dim) if dim is not None else None
        if m is None or dim is None:
            return False
        s = self.settings
        if reserved is not None and reserved < self.factor(dim) * (1.0 - _LEARNED_SINCE):
            return True  # priced below what was learned since: no evidence against today's factor
        if self.samples == 0:
            if reserved is not None:  # judged again once usage is in (`explains_blind`)
                self._blind[dim] = min(reserved, self._blind.get(dim, math.inf))
            return False  # no usage yet to weigh a charge against: the rate's AIMD, for now
        previous, m.last_429, m.last_event = m.last_429, now, now
        if admitted_at < m.last_raise:
            return True
        step = m.before_relax
        if step is not None and admitted_at >= step[0] and now - step[0] < m.period:
            m.value, m.before_relax = max(m.value, step[1]), None  # the probe was wrong: undone
            m.period *= 2.0
            return True
        if now - previous > s.confirm or now - m.last_raise < s.cooldown:
            return False
        ceiling = min(s.max_margin, s.raise_by * max(1.0, 1.0 / self.usage_ratio))
        if m.value >= ceiling - 1e-9:
            return False
        lifted = m.value * s.raise_by
        hypothesis = 1.0 / self.usage_ratio  # "it charges what we count"
        if m.last_raise == -math.inf and hypothesis > 1.0:
            lifted = max(lifted, hypothesis)
        elif m.value < hypothesis:  # relaxed below it since: back to it, not a step past
            lifted = min(lifted, hypothesis)
        if lifted < m.value * s.relax_by:
            return False  # nothing a charge would explain: the rate's AIMD
        m.value = min(ceiling, lifted)
        m.last_raise = now
        m.ratio_at_raise = self.usage_ratio
        self.raises += 1
        return True

    def on_room(self, dim: str, fill: float, now: float) -> bool:
        """The provider's headers show `dim` `fill` full (0..1) while the rate is not cut; True if
        the margin moved. Full, a `cooldown` after the last 429 or raise: the margin holds us
        below what it charges (429s of traffic that has gone raised it, say) — one `raise_by`
        step back, a probe that a 429 refutes like any relaxation, and an emptied bucket too."""
        m = self._margins.get(dim)
        if m is None:
            return False
        step = m.before_relax
        if fill <= ROOM_NONE and step is not None and step[1] > m.value and now - step[0] < m.period:
            m.value, m.before_relax = step[1], None  # the step used the room up: undone, before a 429
            m.period *= 2.0
            return True
        if (
            fill < ROOM_FULL
            or m.value <= 1.0
            or now - max(m.last_event, m.last_raise) < self.settings.cooldown
        ):
            return False
        m.before_relax, m.last_event = (now, m.value), now
        m.value = max(1.0, m.value / self.settings.raise_by)
        return True

    def explains_blind(self) -> bool:
        """Whether the usage seen since explains the 429s left to the AIMD before any usage was
        in: every one was reserved below what the model now says its dimension charges (the
        requests were short, not the pace). Asked once usage is in; forgets them."""
        blind, self._blind = self._blind, {}
        if not blind or self.samples == 0:
            return False
        return all(r < self.factor(d) * (1.0 - _LEARNED_SINCE) for d, r in blind.items())

    def __repr__(self) -> str:
        margins = ", ".join(f"{d}×{m.value:.3g}" for d, m in self._margins.items())
        return f"ChargeModel(usage_ratio={self.usage_ratio:.3g}, {margins}, samples={self.samples})"


# A 429 body naming a rate without naming which: LiteLLM's own (`throttling_error`,
# shared/PROTOCOLS.md "Servers in front of providers"), Anthropic's, OpenAI-compatible servers'.
RATE_ERRORS = frozenset({"throttling_error", "rate_limit_error", "rate_limit_exceeded", "too_many_requests"})
# ... and one naming a concurrency cap: whatever else it carries, no rate is at fault.
CONCURRENCY_ERRORS = frozenset({"concurrency_limit_exceeded", "too_many_concurrent_requests", "concurrency"})


def bare_refusal(o: Outcome, *, rates: bool) -> bool:
    """Whether a 429 is a server turning away what exceeds its in-flight cap (no rate at fault,
    nothing charged): its body says concurrency, or it says nothing of a rate — no retry hint (any
    of them: `batchgate.policy.hints`), no rate-limit headers, no rate named in its body (where no
    rate is known, `rates` False, a body naming only a dimension says nothing either: there is no
    rate of ours to blame). A 429 of any other shape (LiteLLM's `throttling_error` with only
    `llm_provider-retry-after`) is a verdict on the rate."""
    if o.error_type in CONCURRENCY_ERRORS:
        return True
    if o.hint is not None or (o.snapshot is not None and o.snapshot != _NO_HEADERS):
        return False
    if o.error_type in RATE_ERRORS:
        return False
    return not rates or binding_dimension(o.error_type, None) is None


def binding_dimension(error_type: str | None, snapshot: RateLimitSnapshot | None) -> str | None:
    """The dimension a 429 was about: the provider's error type if it names one (OpenAI sends
    "tokens" or "requests"), else the dimension its rate-limit headers show emptiest if that one
    is nearly empty (at most `EMPTY` of its limit); None when neither says."""
    if error_type is not None and error_type in _ERROR_TYPES:
        return _ERROR_TYPES[error_type]
    if snapshot is None:
        return None
    best, best_fraction = None, math.inf
    for dim in ("requests", "tokens", "input_tokens", "output_tokens"):
        limit = getattr(snapshot, f"limit_{dim}")
        remaining = getattr(snapshot, f"remaining_{dim}")
        if limit is None or remaining is None or limit <= 0:
            continue
        fraction = remaining / limit
        if fraction < best_fraction:
            best, best_fraction = dim, fraction
    return best if best_fraction <= EMPTY else None
