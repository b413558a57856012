"""What the server's runs are made of (`RunParts`: the records, files, job store, config and
gateway every run shares) and how one run is run (`RunTerms`: a batch's defaults, or what a native
job's spec makes of them — `job_api.native.JobTerms`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from batchgate.clock import Clock
from batchgate.config import GatewayConfig, JobSpec
from batchgate.endpoints import endpoint_for_url
from batchgate.gateway import Gateway
from batchgate.jobs.progress.timeline import DEFAULT_EVERY_S
from batchgate.jobs.store.location import StoreLocation
from batchgate.jobs.store.protocol import JobStore
from batchgate.server.batch_api.files import Files
from batchgate.server.batch_api.shapes import WINDOW_S
from batchgate.server.callbacks.delivery import Callbacks
from batchgate.server.tenancy.registry import BatchRecord, Registry

MAX_JOBS = 64


@dataclass(frozen=True, slots=True)
class RunParts:
    """What every run is made from: the server's records, files, job store, config and gateway.

    `expire_after_s`: how long a batch may run before it expires (OpenAI's 24 h window);
    `max_jobs`: jobs that run at once (the others wait their turn: the highest priority first,
    then first come first), `max_jobs_per_key` of them one key's; `callbacks`: where a run with a
    callback URL records its end event;
    `timeline_s`: each run's timeline sampling (`serve --sample-every`)."""

    registry: Registry
    files: Files
    store: JobStore
    config: GatewayConfig
    store_path: StoreLocation
    folder: Path
    gateway: Gateway
    clock: Clock
    grace_s: float
    callbacks: Callbacks | None = None
    expire_after_s: float = WINDOW_S
    max_jobs: int = MAX_JOBS
    max_jobs_per_key: int | None = None  # None: half of `max_jobs` (at least 1)
    timeline_s: float = DEFAULT_EVERY_S

    def now(self) -> int:
        return int(self.clock.wall())

    @property
    def places_per_key(self) -> int:
        """How many of the `max_jobs` places one key may hold (`serve --max-jobs-per-key`)."""
        return self.max_jobs_per_key or max(1, self.max_jobs // 2)


@dataclass(frozen=True, slots=True)
class RunTerms:
    """How one run is run: a batch's are these defaults; a native job's come from its spec."""

    priority: str = "normal"
    expires: bool = True  # a batch has a completion window, a native job none
    callback_url: str | None = None  # None: the record's metadata's, if any
    config: GatewayConfig | None = None  # None: the server's
    spec: JobSpec = field(default_factory=JobSpec)  # a native job's own options (`config.job_spec`)
    endpoint: str | None = None  # the one endpoint every line must name (a batch's); None: any


Terms = Callable[[BatchRecord], RunTerms]


def batch_terms(b: BatchRecord) -> RunTerms:
    """A batch's: its lines must all name its `endpoint` (OpenAI's rule; Anthropic's are chat)."""
    return RunTerms(endpoint=endpoint_for_url(b.endpoint))
