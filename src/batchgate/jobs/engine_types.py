"""What a job engine is given and gives back: its options, what it knows of the job (`JobFacts`:
the follow-ups a pipeline hands it, per-step output checks, the deadline), the hooks that hear
what a run does (`EngineHooks`), where it runs (`EngineHost`: clock, gateway), and the outcome of
a run (`jobs.engine` runs them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from batchgate.jobs.cache.cached import JobCache
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec
from batchgate.quota.store.location import StoreSpec
from batchgate.stats import GatewayStatistics

if TYPE_CHECKING:
    from batchgate.clock import Clock
    from batchgate.gateway import Gateway
    from batchgate.jobs.checks.output_check import OutputCheck


@dataclass(frozen=True, slots=True)
class EngineOptions:
    concurrency: int | None = None
    max_attempts: int | None = None
    timeout: float | None = None
    grace_seconds: float = 10.0
    window: int | None = None  # tasks alive at once; default 4 x concurrency (>= 1024)
    quota_store: StoreSpec | None = None  # where provider quotas are shared; None: the config's


class FollowUps(Protocol):
    """Tasks that become ready when another ends (a pipeline's later steps); see `jobs.graph`."""

    def after(self, spec: TaskSpec, outcome: TaskOutcome) -> list[TaskSpec]: ...

    def step_sizes(self) -> dict[str, int]: ...  # the most tasks each step can hold (for the ETA)


ResultHook = Callable[[TaskSpec, TaskOutcome], None]  # hears each live outcome as it is committed
Committed = Callable[[Sequence[TaskOutcome]], None]  # outcomes the store has just committed
EventSink = Callable[[str, dict[str, object]], None]  # hears batch mode's events: (name, fields)


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the engine knows of the job beyond its store and config."""

    follow: FollowUps | None = None  # the tasks a committed outcome makes ready (a pipeline)
    step_checks: Mapping[str, OutputCheck] = field(default_factory=dict)  # replace the job's, by step
    deadline: float | None = None  # wall seconds (`batch_policy.job_deadline`)
    spent_extra_tokens: int = 0  # billed by earlier runs beyond the stored answers (the token budget)
    cache: JobCache | None = None  # the response cache, and identical lines sent once (issue 43)


@dataclass(frozen=True, slots=True)
class EngineHooks:
    """Who hears what a run does; each is optional."""

    on_event: EventSink | None = None  # batch mode's events
    on_result: ResultHook | None = None  # each live outcome once accepted for commit
    on_commit: Committed | None = None  # each group (live or batch mode) once committed


@dataclass(frozen=True, slots=True)
class EngineHost:
    """Where the engine runs. `gateway`: a started gateway shared with other jobs (`batchgate
    serve`: one quota pool per provider for all of them); the engine neither starts nor closes it,
    and its stop leaves the other jobs' requests alone. Without one the engine opens its own, on
    `base_urls` (an embedded emulator's) if given."""

    clock: Clock | None = None  # default: the running loop's
    gateway: Gateway | None = None
    base_urls: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class EngineOutcome:
    status: str  # completed | stopped
    stop_reason: str | None
    elapsed_s: float
    statistics: GatewayStatistics  # the gateway's figures of this run
    progress: Progress
    emulator_stats: dict[str, object] | None
    no_target: bool = False  # stopped because a route had no target left (a key refused, unreachable)
    routes_stopped: bool = False  # a route's every target refused its key: its items failed, others ran
