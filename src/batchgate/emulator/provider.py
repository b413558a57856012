"""One emulated provider at run time: admission (never-fits, concurrency, quota, fault draw), its
concurrency slots, and the plan for answering an admitted request (content, latency, fault).

Admission is synchronous and deterministic given the arrival order: every random draw comes from
`random.Random(f"{seed}:{name}")`, in a fixed order per admitted request (fault, server-error status,
latency). Fault accounting:
- `rate_limit_no_hint`, `retry_after_date` and `insufficient_quota` refuse the request, so it is
  neither admitted nor charged (counted only under `faults`);
- every other fault (5xx, overloaded, hang, reset, truncated, non_json) happens to an admitted,
  charged request, as with real providers, which bill what they started to serve.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from batchgate.emulator.config import ProviderConfig
from batchgate.emulator.content import answer, fit
from batchgate.emulator.limiter import Quota
from batchgate.emulator.modes import text_chars
from batchgate.emulator.stats import ProviderStats
from batchgate.emulator.wire import ApiError, Family, ParsedRequest, http_date, retry_hint_headers

REFUSING_FAULTS = frozenset({"rate_limit_no_hint", "retry_after_date", "insufficient_quota"})
SERVER_ERROR_STATUSES = (500, 502, 503)


@dataclass(slots=True)
class Plan:
    """How to answer one admitted request."""

    text: str
    tokens: int
    cut: bool
    delay: float
    fault: str | None = None
    error: ApiError | None = None
    admitted_at: float = 0.0
    per_token: float = 0.0  # seconds per output token (part of `delay`; a stream paces by it)


class EmulatedProvider:
    """The live state of one emulated provider."""

    def __init__(self, config: ProviderConfig, family: Family, seed: int, window: float, now: float) -> None:
        self.config = config
        self.name = config.name
        self.family = family
        self._seed = f"{seed}:{config.name}"
        self.quota = Quota(
            config.limits,
            config.enforced,
            config.limit_changes,
            window,
            now,
            config.enforcement,
            config.neighbours,
        )
        self._models: dict[str, Quota] = {}
        for models, limits in config.model_limits:  # a group shares one quota
            group = Quota(limits, None, (), window, now, config.enforcement)
            self._models.update(dict.fromkeys(models, group))
        self.header_style = config.headers
        self._chars_per_token = config.charge.chars_per_token
        self.stats = ProviderStats(now)
        self.rng = random.Random(self._seed)
        self._fault_table = tuple((k, r) for k, r in config.faults.items() if r > 0)
        self._cap = config.concurrency.max
        self._reject_overflow = config.concurrency.overflow == "reject"
        self.active = 0
        self.peak_active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        lat = config.latency
        self._ttft_mu = math.log(lat.ttft_p50_ms / 1000) if lat.ttft_p50_ms > 0 else None
        self._ttft_sigma = lat.ttft_sigma
        self._per_token = lat.per_token_ms / 1000

    def reset(self, now: float) -> None:
        """Zero the counters, refill the quota, restart the limit-change schedule and reseed."""
        self.quota.reset(now)
        for quota in set(self._models.values()):
            quota.reset(now)
        self.stats.reset(now)
        self.rng = random.Random(self._seed)
        self.peak_active = self.active

    def quota_for(self, model: str | None) -> Quota:
        """The quota that holds `model`'s requests: its group's (`model_limits`), else the key's."""
        return self._models.get(model, self.quota) if model is not None else self.quota

    def admit(self, req: ParsedRequest, now: float, wall: float) -> Plan:
        """Admit and charge `req`, or raise the ApiError to answer with (charging nothing)."""
        quota = self.quota_for(req.model)
        quota.advance(now)
        cost = req.cost
        dim = quota.never_fits(cost)
        if dim is not None:
            limit = quota.enforced[dim].limit
            raise self.family.never_fits(dim, getattr(cost, dim), limit)
        if self._reject_overflow and self._cap is not None and self.active >= self._cap:
            raise self._overflow()
        wait, binding = quota.wait_time(cost, now)
        if binding is not None:
            err = self.family.rate_limited(binding, _declared_limit(quota, binding))
            err.headers.update(retry_hint_headers(wait))
            raise err
        fault = self._draw_fault()
        if fault in REFUSING_FAULTS:
            raise self._refusal(fault, wall)
        quota.charge(cost, now)
        self.stats.admit(now, cost, req.fingerprint)
        if fault is not None:
            self.stats.fault(fault)
        text, tokens, cut = fit(answer(req.prompt), req.max_tokens, self.family.count_text)
        plan = Plan(text, tokens, cut, 0.0, fault, admitted_at=now)
        if fault == "server_error":
            plan.error = self.family.server_error(self.rng.choice(SERVER_ERROR_STATUSES))
        elif fault == "overloaded":
            plan.error = self.family.overloaded()
        if self._ttft_mu is not None:
            plan.delay = math.exp(self.rng.gauss(self._ttft_mu, self._ttft_sigma))
        plan.per_token = self._per_token
        if self._per_token and plan.error is None:
            plan.delay += self._per_token * tokens * req.n
        return plan

    def answered(self, req: ParsedRequest, plan: Plan, now: float) -> None:
        """An admitted request answers: with `output_charge: adjusted` its output charge becomes
        the real output (the rest of `max_tokens × n` goes back to the output and total-token
        limiters: shared/PROTOCOLS.md, "OTPM is estimated from max_tokens when a request starts
        and adjusted to the real output when it ends"); kept otherwise."""
        if self.config.output_charge != "adjusted":
            return
        unused = req.cost.output_tokens - plan.tokens * req.n
        if unused > 0:
            self.quota_for(req.model).refund({"output_tokens": unused, "tokens": unused}, now)

    def charge_for(self, req: ParsedRequest, body: Mapping[str, Any]) -> None:
        """Charge `req` as this provider does: from its characters when configured so (the
        exact prompt tokens stay in `prompt_tokens`, for `usage`)."""
        cpt = self._chars_per_token
        if cpt is None:
            return
        estimate = math.ceil(text_chars(body) / cpt)
        out = req.cost.output_tokens
        req.cost = replace(req.cost, tokens=estimate + out, input_tokens=estimate)

    def _overflow(self) -> ApiError:
        status = self.config.concurrency.status
        if status != 429:
            err = self.family.concurrency_rejected()
            err.status = status or err.status
            return err
        err = self.family.rate_limited("requests", 0)
        err.message = "Too many concurrent requests."
        err.reason = "concurrency"
        err.ratelimit_headers = False  # no hint at all: no retry-after, no rate-limit headers
        return err

    def _draw_fault(self) -> str | None:
        if not self._fault_table:
            return None
        r = self.rng.random()
        for kind, rate in self._fault_table:
            if r < rate:
                return kind
            r -= rate
        return None

    def _refusal(self, fault: str, wall: float) -> ApiError:
        self.stats.fault(fault)
        if fault == "insufficient_quota":
            err = self.family.insufficient_quota()
            err.ratelimit_headers = False
            return err
        dim = next(iter(self.quota.declared), "requests")
        bucket = self.quota.declared.get(dim)
        err = self.family.rate_limited(dim, bucket.limit if bucket is not None else 0)
        err.reason = "fault"
        if fault == "retry_after_date":
            err.headers["retry-after"] = http_date(math.ceil(wall) + 1)
        else:
            err.ratelimit_headers = False
        return err

    async def acquire_slot(self) -> None:
        """Wait for a concurrency slot (queue mode); immediate when the provider has no cap."""
        if self._cap is None or (self.active < self._cap and not self._waiters):
            self.active += 1
            self.peak_active = max(self.peak_active, self.active)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release_slot()  # the slot was handed over as we were cancelled
            else:
                self._waiters.remove(waiter)
            raise

    def release_slot(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # hand the slot straight over
                return
        self.active -= 1

    @property
    def queued(self) -> int:
        return len(self._waiters)

    def __repr__(self) -> str:
        return (
            f"EmulatedProvider({self.name!r}, {self.family.name}, active={self.active}, queued={self.queued})"
        )


def _declared_limit(quota: Quota, dim: str) -> int:
    bucket = quota.declared.get(dim) or quota.enforced[dim]
    return bucket.limit
