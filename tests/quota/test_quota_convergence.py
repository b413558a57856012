"""Hypothesis: the real engine (scheduler, attempt, quota pool, charge model) against the
emulator's own limiters, on a FakeClock — no socket, no sleeping.

For random per-minute limits, enforcements (token bucket, sliding or fixed window of 1–5 s),
ratios between what the provider charges and our own prompt count, and latencies, a provider
client plays the emulator's admission rule (`batchgate.emulator.enforcement`) and answers after
the drawn latency with the exact charge in `usage`. Once the engine has heard its first answer
(and one window more), what it sends never overruns any window of the enforcement's length by
more than the burst it learned (plus a late timer's credit and one request); and once the debt of
what it sent blind is repaid too, while work is queued it sends at ≥ 0.95 of the limit.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchgate.clock import FakeClock
from batchgate.config import ProviderConfig
from batchgate.emulator.enforcement import make_limiter
from batchgate.emulator.modes import Enforcement
from batchgate.errors import RateLimitError
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.policy.circuit import CircuitSettings
from batchgate.policy.retry import RetryPolicy, RetrySettings
from batchgate.quota.dimension import TIMER_SLACK
from batchgate.quota.limits import QuotaLimits
from batchgate.runtime import build_runtime
from batchgate.scheduler import Scheduler, Target
from batchgate.slots import FairSlots
from batchgate.tokens import char_count
from engineutil import CharCounter, drive

MAX_TOKENS = 10


@dataclass
class Sent:
    at: float
    charge: int
    counted: int  # our own count of its prompt (what it is reserved at before any usage)
    admitted: bool
    backlog: bool  # others were queued for quota when it was sent


@dataclass
class EmulatedProvider:
    """A ProviderClient whose admission is the emulator's limiter for one tokens-per-minute limit."""

    clock: FakeClock
    limiter: Any
    ratio: float  # what the provider charges per unit of our count
    rng: random.Random
    latency: float
    name: str = "p"
    kind: str = "openai"
    log: list[Sent] = field(default_factory=list)
    first_answer: float | None = None
    backlog: Callable[[], bool] = lambda: False

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        counted = char_count(body)
        prompt = math.ceil(counted * self.ratio)
        charge = prompt + MAX_TOKENS
        now = self.clock.now()
        admitted = self.limiter.wait_time(charge, now) <= 0.0
        self.log.append(Sent(now, charge, counted, admitted, self.backlog()))
        if not admitted:
            body_ = {"error": {"type": "tokens", "message": "Rate limit reached on tokens per min"}}
            raise RateLimitError("p: 429", provider="p", status=429, body=body_)
        self.limiter.charge(charge, now)
        await self.clock.sleep(self.latency * math.exp(self.rng.gauss(0.0, 0.3)))
        if self.first_answer is None:
            self.first_answer = self.clock.now()
        usage = Usage(prompt_tokens=prompt, completion_tokens=MAX_TOKENS)
        return ProviderResponse(200, {"choices": [{"message": {"content": "ok"}}]}, usage, {})

    def rate_limits(self, headers: Any, wall_now: float) -> RateLimitSnapshot:
        return RateLimitSnapshot()


async def _scenario(
    tpm: int, kind: str, seconds: float, ratio: float, latency: float, seed: int, *, converge: bool
) -> None:
    clock = FakeClock()
    rng = random.Random(seed)
    limiter = make_limiter(Enforcement(kind, seconds), tpm, clock.now())  # type: ignore[arg-type]
    client = EmulatedProvider(clock, limiter, ratio, rng, latency)
    config = ProviderConfig(name="p", kind="openai", base_url="http://x", limits=QuotaLimits(tpm=tpm))
    runtime = build_runtime(config, client, CharCounter(), clock, CircuitSettings(), seed=seed, timeout=600.0)
    client.backlog = runtime.pool.busy
    sched = Scheduler(
        {"m": [Target(runtime, "m")]},
        clock=clock,
        retry=RetryPolicy(
            RetrySettings(max_attempts=20, base_delay=0.01, max_delay=0.1), random.Random(seed)
        ),
        global_slots=FairSlots(10_000, ["p"], clock),
    )
    per_second = tpm / 60.0
    bodies: list[dict[str, Any]] = []
    while sum(char_count(b) * ratio + MAX_TOKENS for b in bodies) < per_second * (2 * seconds + 4.0):
        words = " ".join("lorem" for _ in range(rng.randint(20, 60)))
        bodies.append(
            {"model": "m", "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": words}]}
        )
    tasks = [asyncio.ensure_future(sched.run(i, b)) for i, b in enumerate(bodies)]
    await drive(clock, tasks)
    assert all(t.result().ok for t in tasks), [t.result().error for t in tasks if not t.result().ok][:3]

    assert client.first_answer is not None
    # what it sent blind (priced at our own count, before any usage) and was charged more for is
    # taken back as debt when those answers come in; one window more, plus that debt's seconds at
    # the rate, and the engine sends on what it has learned
    blind = [s for s in client.log if s.at < client.first_answer and s.admitted]
    debt = sum(s.charge - s.counted - MAX_TOKENS for s in blind)
    knew = client.first_answer + seconds
    settled = knew + max(0.0, debt) / (tpm / 60.0)
    sends = [s for s in client.log if s.at >= knew]
    allowance = tpm * seconds / 60.0
    biggest = max(s.charge for s in client.log)
    rate = per_second * runtime.pool.limits.safety
    learned = rate * (runtime.pool.learning.burst.seconds + TIMER_SLACK)
    # (1) no window of the enforcement's length, after the engine knew, holds more than allowed
    j = 0
    total = 0.0
    for i, s in enumerate(sends):
        total += s.charge
        while sends[j].at <= s.at - seconds:
            total -= sends[j].charge
            j += 1
        assert total <= allowance + learned + biggest + 1e-6, (i, total, allowance, learned, biggest)
    # (2) while work was queued for quota, it sent at >= 0.95 of the limit
    admitted = [s for s in sends if s.at >= settled and s.admitted and s.backlog]
    if converge and len(admitted) > 10:
        span = admitted[-1].at - admitted[0].at
        used = sum(s.charge for s in admitted[:-1])
        assert used >= 0.95 * per_second * span, (used / (per_second * span), kind, seconds, ratio)


# Limits at which one second's allowance (the shortest window the engine paces inside) holds ten or
# more of the largest prompts drawn (~550 units at ratio 1.5). Below that, whole requests cannot
# fill a window: no sender, however clever, gets past ⌊allowance ÷ request⌋ of them into a
# one-second sliding window, so "≥ 0.95 of the limit" would test arithmetic, not the engine.
_LIMITS = {
    "tpm": st.integers(300_000, 600_000),
    "kind": st.sampled_from(["token_bucket", "sliding_window", "fixed_window"]),
    "seconds": st.sampled_from([1.0, 2.0, 5.0]),
    "ratio": st.floats(0.6, 1.5),
    "latency": st.floats(0.05, 1.0),
    "seed": st.integers(0, 2**16),
}


@pytest.mark.slow  # a dozen simulated runs each
@pytest.mark.timeout(900)  # a dozen simulated runs: minutes on a loaded 2-core machine
@settings(max_examples=12, deadline=None)
@given(**_LIMITS)
def test_property_never_overruns_a_window(
    tpm: int, kind: str, seconds: float, ratio: float, latency: float, seed: int
) -> None:
    asyncio.run(_scenario(tpm, kind, seconds, ratio, latency, seed, converge=False))


@pytest.mark.slow  # a dozen simulated runs each
@pytest.mark.timeout(900)
@settings(max_examples=12, deadline=None)
@example(tpm=300_000, kind="token_bucket", seconds=1.0, ratio=1.5, latency=1.0, seed=0)  # once 0.94
# 0.57 while the AIMD cut for the 429s of the blind first second stood after usage explained them
@example(tpm=300_000, kind="sliding_window", seconds=1.0, ratio=1.5, latency=1.0, seed=3)
@given(**_LIMITS)
def test_property_converges_to_the_limit(
    tpm: int, kind: str, seconds: float, ratio: float, latency: float, seed: int
) -> None:
    asyncio.run(_scenario(tpm, kind, seconds, ratio, latency, seed, converge=True))
