"""The collector threshold batchgate raises while a gateway is open (process-wide, restored after).

A gateway at full speed keeps thousands of requests alive at once (each a task, its coroutines,
its reservation and result), so most of its objects outlive CPython's youngest generation (700
allocations by default) and get promoted, and the full collections that follow rescan them all:
about a quarter of a busy gateway's CPU. Raising the youngest generation's threshold to
`settings.gc_threshold` (10,000 by default) collects the same garbage in far fewer passes. It is
only raised, never lowered, and put back when the last gateway closes unless somebody else
changed it in between; `gc_threshold: 0` leaves the collector alone.
"""

from __future__ import annotations

import gc
import threading


class ThresholdHold:
    """Counts the holders of a raised threshold; the process has one (`PROCESS`). Thread-safe:
    gateways run by `Gateway.batch` in several threads share it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.holders = 0
        self._saved: tuple[int, int, int] | None = None
        self._ours: tuple[int, int, int] | None = None

    def hold(self, threshold: int) -> bool:
        """Raise the youngest generation's threshold to at least `threshold` until `let_go()`;
        whether this holder counts (`threshold` > 0)."""
        if threshold <= 0:
            return False
        with self._lock:
            if self.holders == 0:
                self._saved = gc.get_threshold()
                self._ours = None
            current = gc.get_threshold()
            if current[0] < threshold:
                self._ours = (threshold, current[1], current[2])
                gc.set_threshold(*self._ours)
            self.holders += 1
        return True

    def let_go(self) -> None:
        """One holder is done; the last one puts the threshold back (if still the one we set)."""
        with self._lock:
            if self.holders == 0:
                return
            self.holders -= 1
            if self.holders == 0:
                if self._ours is not None and self._saved is not None and gc.get_threshold() == self._ours:
                    gc.set_threshold(*self._saved)
                self._saved = self._ours = None


PROCESS = ThresholdHold()
hold = PROCESS.hold
let_go = PROCESS.let_go
