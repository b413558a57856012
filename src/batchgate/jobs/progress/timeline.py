"""A job's timeline: cumulative samples of its `Progress` (items done and failed, cost, and each
provider's attempts, answers, 429s, errors and summed latency) taken every `every_s` seconds by
the run's ticker and kept in the job store's `timeline` blob, so a finished job's charts can be
drawn without a server (`batchgate report --html`) and a running one's by the dashboard.

The samples are columns (one list per figure, the form the charts read). The timeline is bounded:
past `MAX_SAMPLES` every other sample is dropped and the interval doubles, so a long run keeps its
whole span at a coarser grain. A resumed job appends to what its earlier runs stored (their last
sample is the base of this run's counters, which start from zero).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict, cast

import orjson

from batchgate.jobs.progress.counters import Progress, ProviderTally

TIMELINE_BLOB = "timeline"
MAX_SAMPLES = 720
DEFAULT_EVERY_S = 5.0
JOB_COLUMNS = ("done", "failed", "cost_usd")
PROVIDER_COLUMNS = ("attempts", "answered", "rate_limited", "errors", "latency_ms")


class TimelineData(TypedDict):
    """The stored shape: `t` (wall seconds), the job's columns, and `providers` → name → column
    (`PROVIDER_COLUMNS`) → values, one per sample."""

    every_s: float
    t: list[float]
    done: list[int]
    failed: list[int]
    cost_usd: list[float]
    providers: dict[str, dict[str, list[float]]]


def empty_timeline(every_s: float) -> TimelineData:
    return {"every_s": every_s, "t": [], "done": [], "failed": [], "cost_usd": [], "providers": {}}


def load_timeline(blob: bytes | None, every_s: float = DEFAULT_EVERY_S) -> TimelineData:
    """The stored timeline, or an empty one (no blob, or one this version cannot read)."""
    if blob:
        try:
            data = orjson.loads(blob)
        except orjson.JSONDecodeError:
            data = None
        ok = isinstance(data, dict) and isinstance(data.get("t"), list)
        if ok and isinstance(data, dict) and isinstance(data.get("providers"), dict):
            return cast("TimelineData", data)  # as a run stored it (`Timeline.dump`)
    return empty_timeline(every_s)


@dataclass
class Timeline:
    """The run's sampler: `due(now)` says when the next sample is wanted (monotonic clock seconds),
    `take(wall, progress)` appends one. Reading the counters is all it does on the hot path's side.
    `started`: it holds the earlier runs' samples (`start`) or a sample of its own."""

    every_s: float
    data: TimelineData = field(init=False)
    started: bool = False
    _next: float | None = None
    _base: tuple[int, int, float] = (0, 0, 0.0)  # done, failed, cost_usd
    _provider_base: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data = empty_timeline(self.every_s)

    def start(self, stored: TimelineData) -> None:
        """Continue `stored` (the earlier runs' timeline): its last values are this run's base."""
        self.data, self.started = stored, True
        if not stored["t"]:
            self.data["every_s"] = self.every_s
        else:
            self.data["every_s"] = max(float(stored.get("every_s") or 0.0), self.every_s)
            self._base = (int(stored["done"][-1]), int(stored["failed"][-1]), float(stored["cost_usd"][-1]))
            self._provider_base = {
                name: {c: float(cols[c][-1]) for c in PROVIDER_COLUMNS}
                for name, cols in stored["providers"].items()
            }

    def due(self, now: float) -> bool:
        return self._next is None or now >= self._next

    def take(self, now: float, wall: float, progress: Progress) -> None:
        self.started = True
        self._next = now + float(self.data["every_s"])
        d, (done, failed, cost) = self.data, self._base
        d["t"].append(round(wall, 3))
        d["done"].append(done + progress.succeeded + progress.failed)
        d["failed"].append(failed + progress.failed)
        d["cost_usd"].append(round(cost + progress.cost_usd, 6))
        for name in progress.tallies.keys() | d["providers"].keys():
            cols = d["providers"].get(name)
            if cols is None:  # a provider first seen now: zeros before
                cols = d["providers"][name] = {c: [0] * (len(d["t"]) - 1) for c in PROVIDER_COLUMNS}
            self._append(cols, self._provider_base.get(name, {}), progress.tallies.get(name))
        if len(d["t"]) > MAX_SAMPLES:
            self._halve()

    @staticmethod
    def _append(cols: dict[str, list[float]], base: dict[str, float], tally: ProviderTally | None) -> None:
        for c in PROVIDER_COLUMNS:
            value = base.get(c, 0) + (getattr(tally, c) if tally is not None else 0)
            cols[c].append(round(value, 1) if c == "latency_ms" else int(value))

    def _halve(self) -> None:
        """Every other sample dropped (the last kept), and the interval doubled."""
        d = self.data
        pick = sorted(range(len(d["t"]) - 1, -1, -2))
        d["t"] = [d["t"][i] for i in pick]
        d["done"] = [d["done"][i] for i in pick]
        d["failed"] = [d["failed"][i] for i in pick]
        d["cost_usd"] = [d["cost_usd"][i] for i in pick]
        for cols in d["providers"].values():
            for c in PROVIDER_COLUMNS:
                cols[c] = [cols[c][i] for i in pick]
        d["every_s"] = float(d["every_s"]) * 2

    def dump(self) -> bytes:
        """The timeline's one serializer, as the job store keeps it."""
        return orjson.dumps(self.data)
