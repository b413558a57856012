"""Everything batchgate keeps alive for one provider: its client, quota pool, in-flight limit (and
the policy that learns it), latency model, circuit breaker (and the requests waiting out its
pause), token counter and statistics recorder — built from its config."""

from __future__ import annotations

from dataclasses import dataclass

from batchgate.clock import Clock
from batchgate.config import ProviderConfig
from batchgate.inflight import InflightLimit
from batchgate.pausing import PauseWaits
from batchgate.policy.aimd import AimdSettings
from batchgate.policy.circuit import CircuitBreaker, CircuitSettings
from batchgate.policy.concurrency import SLOW_START, ConcurrencyAimd
from batchgate.policy.latency import LatencyModel, LatencySettings
from batchgate.providers.base import ProviderClient
from batchgate.quota.pool import QuotaPool
from batchgate.stats import ProviderRecorder
from batchgate.tokens import TokenCounter

DEFAULT_TIMEOUT = 120.0
PRIOR_ANSWERS = 20.0  # a provider's first 429 among its first answers is noise, not a verdict


@dataclass(slots=True)
class ProviderRuntime:
    name: str
    config: ProviderConfig
    client: ProviderClient
    pool: QuotaPool
    slots: InflightLimit
    breaker: CircuitBreaker
    counter: TokenCounter
    recorder: ProviderRecorder
    concurrency: ConcurrencyAimd
    latency: LatencyModel
    pauses: PauseWaits  # the requests waiting while the target is paused (an outage waited out)


def build_runtime(
    config: ProviderConfig,
    client: ProviderClient,
    counter: TokenCounter,
    clock: Clock,
    circuit: CircuitSettings,
    seed: int = 0,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    hedge: bool = True,
) -> ProviderRuntime:
    """`timeout` is the configured per-request maximum the adaptive timeouts stay under; `hedge`
    False never sends a straggler again."""
    # nothing declared: its limits are learned from its answers' headers (`QuotaPool`), its
    # in-flight cap from a slow start (`batchgate.policy.concurrency`); our own emulator is known
    unknown = not config.limits.declared() and not config.emulated
    aimd = AimdSettings(prior_answers=PRIOR_ANSWERS)
    pool = QuotaPool(config.name, config.limits, clock, aimd, learn=unknown)
    pool.settles_output(config.output_adjusted, learnable=config.output_charge is None)
    breaker = CircuitBreaker(circuit)
    concurrency = ConcurrencyAimd(config.max_concurrency, start=SLOW_START if unknown else None)
    return ProviderRuntime(
        name=config.name,
        config=config,
        client=client,
        pool=pool,
        slots=InflightLimit(concurrency.limit),
        breaker=breaker,
        counter=counter,
        recorder=ProviderRecorder(config.name, seed=seed),
        concurrency=concurrency,
        latency=LatencyModel(timeout, LatencySettings(hedge=hedge)),
        pauses=PauseWaits(clock, breaker.takeout),
    )
