"""How long a run has left, from the step that binds, and whether it moves at all.

The pending count over the rate since the start misleads twice: a pipeline's later step (or a
provider that slowed down) sets the pace long after the average has been made, and a run where
nothing ends keeps showing its last estimate. Here each key (a pipeline's or fan-out's step; a
plain job has one) is paced by the tasks it ended in the last `window_s` seconds, and what it has
left over that pace is its time; the run's ETA is the largest of these — the step that binds —
and names it. A key with work left and no pace of its own yet takes the run's recent pace. When
no task has ended for `stall_after_s` (or three times the longest wait between two ends seen so
far, for runs of slow requests) while work is left, there is no ETA: the run is `stalled`, for
that long. Pure: the caller passes in the time (the run's injected clock) and the counts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

WINDOW_S = 60.0  # the recent pace is measured over the last minute
STALL_AFTER_S = 30.0  # this long without a task ending, with work left: stalled


@dataclass(frozen=True, slots=True)
class EtaView:
    seconds: float | None  # time left; None when unknown or stalled
    binding: str | None  # the key (step) that sets it; None for a plain job or when unknown
    stalled_s: float | None  # how long nothing has ended, once that passed `stall_after_s`


class Eta:
    """Samples of the counts each key has ended, over a sliding window; see the module docstring."""

    def __init__(self, window_s: float = WINDOW_S, stall_after_s: float = STALL_AFTER_S) -> None:
        self.window_s = window_s
        self.stall_after_s = stall_after_s
        self._samples: deque[tuple[float, dict[str, int]]] = deque()
        self._moved_at: float | None = None
        self._ended = -1
        self._longest_gap = 0.0  # between two ends (the first counted from the first sample)

    def observe(self, now: float, ended: Mapping[str, int], left: Mapping[str, int]) -> EtaView:
        """`ended`: tasks each key ended so far in this run (they only grow); `left`: what each
        key has still to do."""
        total = sum(ended.values())
        if self._moved_at is None:
            self._ended, self._moved_at = total, now
        elif total != self._ended:
            self._longest_gap = max(self._longest_gap, now - self._moved_at)
            self._ended, self._moved_at = total, now
        self._samples.append((now, dict(ended)))
        while len(self._samples) > 2 and self._samples[1][0] <= now - self.window_s:
            self._samples.popleft()  # keep one sample at or before the window's start
        if sum(left.values()) <= 0:
            return EtaView(0.0, None, None)
        idle = now - self._moved_at
        if idle >= max(self.stall_after_s, 3 * self._longest_gap):
            return EtaView(None, None, idle)
        return self._estimate(now, ended, left)

    def _estimate(self, now: float, ended: Mapping[str, int], left: Mapping[str, int]) -> EtaView:
        since, before = self._samples[0]
        span = now - since
        if span <= 0:
            return EtaView(None, None, None)
        overall = (sum(ended.values()) - sum(before.values())) / span
        worst: tuple[float, str] | None = None
        for key, todo in left.items():
            if todo <= 0:
                continue
            pace = (ended.get(key, 0) - before.get(key, 0)) / span or overall
            if pace <= 0:
                return EtaView(None, None, None)
            if worst is None or todo / pace > worst[0]:
                worst = (todo / pace, key)
        if worst is None:
            return EtaView(0.0, None, None)
        binding = worst[1] if len(left) > 1 else None
        return EtaView(worst[0], binding or None, None)
