"""What a job engine is given and gives back: its options, the follow-ups a pipeline hands it, the
hook that hears each outcome, and the outcome of a run (`jobs.engine` runs them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from batchgate.jobs.io.progress import Progress
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec
from batchgate.quota.store.location import StoreSpec
from batchgate.stats import GatewayStatistics


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


@dataclass(frozen=True, slots=True)
class EngineOutcome:
    status: str  # completed | stopped
    stop_reason: str | None
    elapsed_s: float
    statistics: GatewayStatistics  # the gateway's figures of this run
    progress: Progress
    emulator_stats: dict[str, Any] | None
    no_target: bool = False  # stopped because a route had no target left (a key refused, unreachable)
