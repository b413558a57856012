"""Prometheus metrics of running jobs, read at scrape time from the figures batchgate keeps anyway:
each job's `Progress`, its gateway's `statistics()` (per provider: the recorder's counters and
latency buckets, the quota pool's `statistics()`, the breaker's state). Nothing is counted on the
request path for them; a scrape costs one `statistics()` per job, and nothing when nobody scrapes.

Two collectors share the provider part (`ProviderFamilies`) and the job part (`JobFamilies`):
`JobCollector` for a CLI run (`--metrics-port`: each job its own gateway, so the provider families
carry `job_id`), and `ServerCollector` for `batchgate serve` (one gateway shared by every job, so
the provider families are labelled by `provider` only — per-job copies of shared counters would
add up wrong — and the job families carry `job_id` and `priority`; see the end of this docstring).

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

On `batchgate serve` (`ServerCollector`) the provider families above have no `job_id` label, the
job families have `{job_id,priority}` (`job_running` is 0 for a job queued for a place, or ended),
and two more families say how callbacks fare:

    batchgate_callback_deliveries_total{outcome}  delivered | failed_attempt (every attempt not
                                                  delivered) | given_up (events abandoned)
    batchgate_callbacks_pending                   events in the outbox still to deliver
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from batchgate.jobs.engine import JobEngine
from batchgate.jobs.progress.counters import Progress
from batchgate.observe.server_view import ServerView
from batchgate.stats import LATENCY_BOUNDS_MS, GatewayStatistics, ProviderStatistics

CONTENT_TYPE = CONTENT_TYPE_LATEST
CIRCUIT_STATES = ("closed", "open", "half_open", "paused", "out")
_JOB = ("job_id",)
_SERVER_JOB = ("job_id", "priority")


@dataclass(frozen=True, slots=True)
class RunView:
    """What the collector reads of one job: its figures and its gateway's statistics (None before
    the gateway started); `running` while the gateway is open."""

    job_id: str
    progress: Progress
    statistics: GatewayStatistics | None
    running: bool


RunSource = Callable[[], Iterable[RunView]]
ServerSource = Callable[[], ServerView]


def engine_view(engine: JobEngine) -> RunView:
    """A job engine's figures now: live while it runs, its final statistics once it ended."""
    gw = engine.gateway
    stats = gw.statistics() if gw is not None else engine.last_statistics
    return RunView(engine.job_id, engine.progress, stats, running=gw is not None)


def _metrics(families: object) -> Iterator[Metric]:
    yield from (v for v in vars(families).values() if isinstance(v, Metric))


class ProviderFamilies:
    """The per-provider families of one scrape; their labels start with `lead` (a CLI run:
    `job_id`; a server: nothing, its gateway being shared by every job) then `provider`."""

    def __init__(self, lead: Sequence[str]) -> None:
        c, g = CounterMetricFamily, GaugeMetricFamily
        p = [*lead, "provider"]
        self.sent = c("batchgate_requests_sent", "Attempts sent (hedges included).", labels=p)
        self.requests = c(
            "batchgate_requests", "Answered attempts by outcome (ok or error kind).", labels=[*p, "outcome"]
        )
        self.limited = c("batchgate_rate_limited", "429 answers received.", labels=p)
        self.retries = c("batchgate_retries", "Attempts retried.", labels=p)
        self.hedges = c("batchgate_hedges", "Straggler hedges sent.", labels=p)
        self.tokens = c("batchgate_tokens", "Tokens of answers kept.", labels=[*p, "direction"])
        self.wasted = c("batchgate_wasted_tokens", "Tokens charged for failed attempts.", labels=p)
        self.cost = c("batchgate_cost_usd", "USD billed.", labels=p)
        self.latency = HistogramMetricFamily(
            "batchgate_request_duration_seconds", "Answered attempts' latency.", labels=p
        )
        self.in_flight = g("batchgate_in_flight_requests", "Requests at the provider now.", labels=p)
        dim = [*p, "dimension"]
        self.level = g("batchgate_quota_level", "What the quota bucket holds now.", labels=dim)
        self.capacity = g("batchgate_quota_capacity", "The most the quota bucket holds.", labels=dim)
        self.limit = g("batchgate_quota_limit_per_minute", "The limit in force.", labels=dim)
        self.rate = g("batchgate_quota_rate_per_second", "The pace admitted now.", labels=dim)
        self.waiting = g("batchgate_quota_waiting_requests", "Requests queued for quota.", labels=p)
        self.open = g("batchgate_quota_open_reservations", "Reservations not yet settled.", labels=p)
        self.paused = g("batchgate_quota_paused", "1 while a retry hint pauses the provider.", labels=p)
        self.aimd = g("batchgate_aimd_factor", "Share of the limit driven (AIMD).", labels=p)
        self.circuit = g("batchgate_circuit_state", "1 for the circuit's state.", labels=[*p, "state"])
        self.unreachable = g("batchgate_provider_unreachable", "1 while unreachable.", labels=p)

    def all(self) -> Iterator[Metric]:
        return _metrics(self)

    def add(self, lead: Sequence[str], s: ProviderStatistics, cost_usd: float) -> None:
        """One provider's figures; `lead` the values of the leading labels; `cost_usd` what it billed."""
        lb = [*lead, s.name]
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
        self.cost.add_metric(lb, cost_usd)
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
        self.open.add_metric(lb, q.open)
        self.paused.add_metric(lb, 0 if q.paused_until is None else 1)
        self.aimd.add_metric(lb, q.aimd_factor)


class JobFamilies:
    """The per-job families of one scrape, labelled by `labels` (`job_id`, and on a server `priority`)."""

    def __init__(self, labels: Sequence[str]) -> None:
        g = GaugeMetricFamily
        self.tasks = g("batchgate_job_tasks", "The job's tasks by state.", labels=[*labels, "state"])
        self.running = g("batchgate_job_running", "1 while the run sends.", labels=list(labels))

    def all(self) -> Iterator[Metric]:
        return _metrics(self)

    def add(self, values: Sequence[str], p: Progress | None, running: bool) -> None:
        """A job's tasks by state (none while it has not started: `p` None) and whether it sends."""
        self.running.add_metric(list(values), 1 if running else 0)
        if p is None:
            return
        states = {
            "pending": max(0, p.total - p.done - p.in_flight),
            "running": p.in_flight,
            "succeeded": p.succeeded,
            "failed": p.failed,
            "done_earlier": p.done_before,
        }
        for state, n in states.items():
            self.tasks.add_metric([*values, state], n)


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
    """A CLI run's collector: every scrape reads the jobs `source` yields, each with its own gateway."""

    def __init__(self, source: RunSource) -> None:
        self._source = source

    def describe(self) -> list[Metric]:
        return []  # no collect() at registration: the families exist only while scraped

    def collect(self) -> Iterator[Metric]:
        providers, jobs = ProviderFamilies(_JOB), JobFamilies(_JOB)
        for view in self._source():
            jobs.add([view.job_id], view.progress, view.running)
            stats = view.statistics
            for s in stats.providers.values() if stats is not None else ():
                providers.add([view.job_id], s, view.progress.cost_by_provider.get(s.name, 0.0))
        yield from providers.all()
        yield from jobs.all()


class ServerCollector(Collector):
    """`batchgate serve`'s collector: the shared gateway's providers once, then its jobs and callbacks."""

    def __init__(self, source: ServerSource) -> None:
        self._source = source

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        view = self._source()
        providers, jobs = ProviderFamilies(()), JobFamilies(_SERVER_JOB)
        for s in view.statistics.providers.values():
            providers.add((), s, view.cost_by_provider.get(s.name, 0.0))
        for job in view.jobs:
            jobs.add([job.job_id, job.priority], job.progress, job.running)
        deliveries = CounterMetricFamily(
            "batchgate_callback_deliveries",
            "Callback attempts delivered or failed, and events given up.",
            labels=["outcome"],
        )
        for outcome, n in view.callback_deliveries.items():
            deliveries.add_metric([outcome], n)
        pending = GaugeMetricFamily(
            "batchgate_callbacks_pending", "Callback events still to deliver.", value=view.callbacks_pending
        )
        yield from providers.all()
        yield from jobs.all()
        yield from (deliveries, pending)


def registry_for(source: RunSource, *, process: bool = True) -> CollectorRegistry:
    """A registry with the jobs' collector (and the process's CPU and memory, unless `process`
    is False) — what `/metrics` serves for the CLI's `--metrics-port`."""
    return _registry(JobCollector(source), process)


def server_registry(source: ServerSource, *, process: bool = True) -> CollectorRegistry:
    """The same for `batchgate serve`: its shared gateway, its jobs and its callbacks."""
    return _registry(ServerCollector(source), process)


def _registry(collector: Collector, process: bool) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    if process:
        ProcessCollector(registry=registry)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus' text format (serve it with `CONTENT_TYPE`)."""
    return generate_latest(registry)
