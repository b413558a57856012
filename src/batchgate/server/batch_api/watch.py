"""The runs `/metrics` shows on a server: those running (their engine's live `Progress`, read at
scrape time), the last `FINISHED_KEPT` that ended (their final figures, so a scraper that comes
after the end still sees them; older ones drop off, which keeps the label set bounded), and the
USD each provider billed to runs that ended (the running runs' own bills are added at scrape time,
so the total only grows). Updated when a run starts or ends — never per request."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from batchgate.jobs.progress.counters import Progress

FINISHED_KEPT = 20


@dataclass(frozen=True, slots=True)
class Watched:
    job_id: str
    priority: str
    progress: Progress


class RunWatch:
    def __init__(self, kept: int = FINISHED_KEPT) -> None:
        self.running: dict[str, Watched] = {}
        self.finished: deque[Watched] = deque(maxlen=kept)
        self._ended_cost: dict[str, float] = {}

    def started(self, job_id: str, priority: str, progress: Progress) -> None:
        self._forget(job_id)  # a resumed or retried job: its earlier run's figures go
        self.running[job_id] = Watched(job_id, priority, progress)

    def ended(self, job_id: str) -> None:
        run = self.running.pop(job_id, None)
        if run is None:
            return
        for provider, usd in run.progress.cost_by_provider.items():
            self._ended_cost[provider] = self._ended_cost.get(provider, 0.0) + usd
        self.finished.append(run)

    def cost_by_provider(self) -> dict[str, float]:
        """USD billed per provider since the server started: ended runs and running ones."""
        total = dict(self._ended_cost)
        for run in self.running.values():
            for provider, usd in run.progress.cost_by_provider.items():
                total[provider] = total.get(provider, 0.0) + usd
        return total

    def _forget(self, job_id: str) -> None:
        if any(run.job_id == job_id for run in self.finished):
            kept = [run for run in self.finished if run.job_id != job_id]
            self.finished.clear()
            self.finished.extend(kept)
