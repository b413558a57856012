"""Prometheus metrics of running jobs, read at scrape time from the figures batchgate keeps anyway:
each job's `Progress`, its gateway's `statistics()` (per provider: the recorder's counters and
latency buckets, the quota pool's `statistics()`, the breaker's state). Nothing is counted on the
request path for them; a scrape costs one `statistics()` per job, and nothing when nobody scrapes.

Every name starts with `batchgate_`; counters end in `_total`, units are in the names (seconds,
USD), labels are bounded: `job_id` (one per job a process runs — not `job`, which Prometheus
sets itself), `provider`, `outcome` (`ok` or an error kind), `direction`, `dimension`, `state`.
Never a custom_id or a prompt.

    batchgate_requests_sent_total{job_id,provider}            attempts sent (hedges included)
    batchgate_requests_total{job_id,provider,outcome}         answered attempts, by ok / error kind
    batchgate_rate_limited_total{job_id,provider}             429s received
    batchgate_retries_total{job_id,provider}                  attempts retried
    batchgate_hedges_total{job_id,provider}                   straggler hedges sent
    batchgate_tokens_total{job_id,provider,direction}         input / output tokens of answers kept
    batchgate_wasted_tokens_total{job_id,provider}            tokens charged for failed attempts
    batchgate_cost_usd_total{job_id,provider}                 USD billed
    batchgate_request_duration_seconds{job_id,provider}       histogram of answered attempts
    batchgate_in_flight_requests{job_id,provider}             at the provider now
    batchgate_quota_level{job_id,provider,dimension}          what the bucket holds now
    batchgate_quota_capacity{job_id,provider,dimension}       the most it holds (the burst)
    batchgate_quota_limit_per_minute{job_id,provider,dimension}   the limit in force (declared or learned)
    batchgate_quota_rate_per_second{job_id,provider,dimension}    the pace admitted now (safety x AIMD)
    batchgate_quota_waiting_requests{job_id,provider}         queued for quota
    batchgate_quota_paused{job_id,provider}                   1 while a retry hint pauses it
    batchgate_aimd_factor{job_id,provider}                    share of the limit driven (0-1]
    batchgate_circuit_state{job_id,provider,state}            1 for the state it is in
    batchgate_provider_unreachable{job_id,provider}           1 while it cannot be reached
    batchgate_job_tasks{job_id,state}                         pending | running | succeeded | failed
                                                              (this run) | done_earlier (earlier runs)
    batchgate_job_running{job_id}                             1 while the run sends, 0 once it ended
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from batchgate.jobs.engine import JobEngine
from batchgate.jobs.io.progress import Progress
from batchgate.stats import LATENCY_BOUNDS_MS, GatewayStatistics, ProviderStatistics

CONTENT_TYPE = CONTENT_TYPE_LATEST
CIRCUIT_STATES = ("closed", "open", "half_open")
_P = ["job_id", "provider"]


@dataclass(frozen=True, slots=True)
class RunView:
    """What the collector reads of one job: its figures and its gateway's statistics (None before
    the gateway started); `running` while the gateway is open."""

    job_id: str
    progress: Progress
    statistics: GatewayStatistics | None
    running: bool


RunSource = Callable[[], Iterable[RunView]]


def engine_view(engine: JobEngine) -> RunView:
    """A job engine's figures now: live while it runs, its final statistics once it ended."""
    gw = engine.gateway
    stats = gw.statistics() if gw is not None else engine.last_statistics
    return RunView(engine.job_id, engine.progress, stats, running=gw is not None)


class _Families:
    """The metric families of one scrape, filled job by job."""

    def __init__(self) -> None:
        c, g = CounterMetricFamily, GaugeMetricFamily
        self.sent = c("batchgate_requests_sent", "Attempts sent (hedges included).", labels=_P)
        self.requests = c(
            "batchgate_requests", "Answered attempts by outcome (ok or error kind).", labels=[*_P, "outcome"]
        )
        self.limited = c("batchgate_rate_limited", "429 answers received.", labels=_P)
        self.retries = c("batchgate_retries", "Attempts retried.", labels=_P)
        self.hedges = c("batchgate_hedges", "Straggler hedges sent.", labels=_P)
        self.tokens = c("batchgate_tokens", "Tokens of answers kept.", labels=[*_P, "direction"])
        self.wasted = c("batchgate_wasted_tokens", "Tokens charged for failed attempts.", labels=_P)
        self.cost = c("batchgate_cost_usd", "USD billed.", labels=_P)
        self.latency = HistogramMetricFamily(
            "batchgate_request_duration_seconds", "Answered attempts' latency.", labels=_P
        )
        self.in_flight = g("batchgate_in_flight_requests", "Requests at the provider now.", labels=_P)
        dim = [*_P, "dimension"]
        self.level = g("batchgate_quota_level", "What the quota bucket holds now.", labels=dim)
        self.capacity = g("batchgate_quota_capacity", "The most the quota bucket holds.", labels=dim)
        self.limit = g("batchgate_quota_limit_per_minute", "The limit in force.", labels=dim)
        self.rate = g("batchgate_quota_rate_per_second", "The pace admitted now.", labels=dim)
        self.waiting = g("batchgate_quota_waiting_requests", "Requests queued for quota.", labels=_P)
        self.paused = g("batchgate_quota_paused", "1 while a retry hint pauses the provider.", labels=_P)
        self.aimd = g("batchgate_aimd_factor", "Share of the limit driven (AIMD).", labels=_P)
        self.circuit = g("batchgate_circuit_state", "1 for the circuit's state.", labels=[*_P, "state"])
        self.unreachable = g("batchgate_provider_unreachable", "1 while unreachable.", labels=_P)
        self.tasks = g("batchgate_job_tasks", "The job's tasks by state.", labels=["job_id", "state"])
        self.running = g("batchgate_job_running", "1 while the run sends.", labels=["job_id"])

    def all(self) -> Iterator[Metric]:
        yield from (v for v in vars(self).values() if isinstance(v, Metric))

    def add_job(self, view: RunView) -> None:
        p, job = view.progress, view.job_id
        running = p.in_flight
        states = {
            "pending": max(0, p.total - p.done - running),
            "running": running,
            "succeeded": p.succeeded,
            "failed": p.failed,
            "done_earlier": p.done_before,
        }
        for state, n in states.items():
            self.tasks.add_metric([job, state], n)
        self.running.add_metric([job], 1 if view.running else 0)

    def add_provider(self, view: RunView, s: ProviderStatistics) -> None:
        lb = [view.job_id, s.name]
        self.sent.add_metric(lb, s.requests)
        self.requests.add_metric([*lb, "ok"], s.succeeded)
        for kind, n in sorted(s.errors_by_kind.items()):
            self.requests.add_metric([*lb, kind], n)
        self.limited.add_metric(lb, s.rate_limited)
        self.retries.add_metric(lb, s.retries)
        self.hedges.add_metric(lb, s.hedged)
        self.tokens.add_metric([*lb, "input"], s.prompt_tokens)
        self.tokens.add_metric([*lb, "output"], s.completion_tokens)
        self.wasted.add_metric(lb, s.wasted_tokens)
        self.cost.add_metric(lb, view.progress.cost_by_provider.get(s.name, 0.0))
        self.latency.add_metric(lb, _buckets(s.latency_buckets), s.latency_sum_ms / 1000.0)
        self.in_flight.add_metric(lb, s.in_flight)
        self.unreachable.add_metric(lb, 1 if s.unreachable else 0)
        for state in CIRCUIT_STATES:
            self.circuit.add_metric([*lb, state], 1 if s.circuit == state else 0)
        q = s.quota
        if q is None:
            return
        for name in q.limits_per_minute:
            self.level.add_metric([*lb, name], q.levels.get(name, 0.0))
            self.capacity.add_metric([*lb, name], q.capacities.get(name, 0.0))
            self.limit.add_metric([*lb, name], q.limits_per_minute[name])
            self.rate.add_metric([*lb, name], q.effective_per_second.get(name, 0.0))
        self.waiting.add_metric(lb, q.waiters)
        self.paused.add_metric(lb, 0 if q.paused_until is None else 1)
        self.aimd.add_metric(lb, q.aimd_factor)


def _buckets(counts: Sequence[int]) -> list[tuple[str, float]]:
    """Cumulative `(le, count)` pairs from per-bucket counts (the last is `+Inf`)."""
    counts = list(counts) or [0] * (len(LATENCY_BOUNDS_MS) + 1)
    out: list[tuple[str, float]] = []
    seen = 0
    for bound, n in zip((*(b / 1000.0 for b in LATENCY_BOUNDS_MS), None), counts, strict=True):
        seen += n
        out.append(("+Inf" if bound is None else repr(bound), seen))
    return out


class JobCollector(Collector):
    """A custom collector: every scrape reads the jobs `source` yields (see the module docstring)."""

    def __init__(self, source: RunSource) -> None:
        self._source = source

    def describe(self) -> list[Metric]:
        return []  # no collect() at registration: the families exist only while scraped

    def collect(self) -> Iterator[Metric]:
        fams = _Families()
        for view in self._source():
            fams.add_job(view)
            stats = view.statistics
            for provider in stats.providers.values() if stats is not None else ():
                fams.add_provider(view, provider)
        yield from fams.all()


def registry_for(source: RunSource, *, process: bool = True) -> CollectorRegistry:
    """A registry with the jobs' collector (and the process's CPU and memory, unless `process`
    is False) — what `/metrics` serves, for the CLI's `--metrics-port` or a server."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(source))
    if process:
        ProcessCollector(registry=registry)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus' text format (serve it with `CONTENT_TYPE`)."""
    return generate_latest(registry)
