"""What `batchgate serve`'s `/metrics` reads at scrape time, as plain values (no Prometheus here, so
a server builds them without the `metrics` extra): the shared gateway's statistics, the USD each
provider billed, the jobs it shows and the callbacks' figures (`metrics.ServerCollector` turns them
into metric families)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from batchgate.jobs.progress.counters import Progress
from batchgate.stats import GatewayStatistics


@dataclass(frozen=True, slots=True)
class JobView:
    """One job the server shows: its run's figures (None while it waits for a place) and whether
    it sends now."""

    job_id: str
    priority: str
    progress: Progress | None
    running: bool


@dataclass(frozen=True, slots=True)
class ServerView:
    statistics: GatewayStatistics
    cost_by_provider: Mapping[str, float]  # USD billed since the server started
    jobs: Sequence[JobView]
    callback_deliveries: Mapping[str, int]  # delivered | failed_attempt | given_up
    callbacks_pending: int
