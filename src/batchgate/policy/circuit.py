"""A circuit breaker per routing target: stop sending to a target that is down, probe it later.

closed → (failure_threshold consecutive transport/5xx/529 failures) → open for `open_seconds`
→ half_open: one probe may go through; its success closes the circuit, its failure opens it
again for another `open_seconds`. A probe that never reports back is presumed lost after
`open_seconds`, and another probe is allowed. Pure: the caller passes the time in and decides
which failures count (`counts_as_failure` gives the default classification).

A target that cannot serve anything (its key refused, nowhere to connect) is taken out: state
`out`, not available until it is let back in (`takeout.py` decides when; the caller reports each
failure to `takeout.record`). A target that answered before and then cannot be reached is
`paused` (`outage.py`): not available to the routing; its requests wait for the pause's probe,
one at a time, paced by `Pause.next_probe` rather than `open_seconds`. A success anywhere resets
its count like the breaker's, and ends a pause.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from batchgate.errors import OverloadedError, ServerError, TransportError
from batchgate.policy.takeout import TakeOut, TakeOutSettings

CircuitState = Literal["closed", "open", "half_open", "paused", "out"]


@dataclass(frozen=True, slots=True)
class CircuitSettings:
    failure_threshold: int = 5  # consecutive transport/5xx/529 failures that open the circuit
    open_seconds: float = 10.0
    take_out: TakeOutSettings = field(default_factory=TakeOutSettings)

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if self.open_seconds < 0:
            raise ValueError("open_seconds must not be negative")


def counts_as_failure(error: BaseException) -> bool:
    """Whether an error says the target is down (transport, 5xx, 529) rather than the request is bad."""
    return isinstance(error, TransportError | ServerError | OverloadedError)


class CircuitBreaker:
    """The health of one target; see the module docstring."""

    def __init__(self, settings: CircuitSettings | None = None) -> None:
        self.settings = settings or CircuitSettings()
        self.consecutive_failures = 0
        self.opened = 0  # how many times the circuit opened
        self._open_until = -math.inf
        self._tripped = False  # open or half-open
        self._probe_since: float | None = None
        self.takeout = TakeOut(self.settings.take_out)

    def is_out(self, now: float) -> bool:
        """Taken out of its routes (`takeout.reason` says why)."""
        return self.takeout.is_out(now)

    def state(self, now: float) -> CircuitState:
        if self.takeout.is_out(now):
            return "out"
        if self.takeout.pause is not None:
            return "paused"
        if not self._tripped:
            return "closed"
        return "open" if now < self._open_until else "half_open"

    def allow(self, now: float) -> bool:
        """Whether a request may go to the target now (in half-open, only one probe at a time)."""
        state = self.state(now)
        if state == "closed":
            return True
        if state in ("open", "paused", "out"):
            return False
        if self._probe_since is not None and now - self._probe_since < self.settings.open_seconds:
            return False
        self._probe_since = now
        return True

    def available(self, now: float) -> bool:
        """Like `allow` but without claiming the probe: for ranking targets."""
        state = self.state(now)
        if state == "half_open":
            return self._probe_since is None or now - self._probe_since >= self.settings.open_seconds
        return state == "closed"

    def record_success(self, now: float) -> None:
        self.takeout.record_answer()
        self.consecutive_failures = 0
        self._tripped = False
        self._probe_since = None
        self._open_until = -math.inf

    def record_failure(self, now: float) -> None:
        self.consecutive_failures += 1
        half_open = self.state(now) == "half_open"
        if half_open or (not self._tripped and self.consecutive_failures >= self.settings.failure_threshold):
            self._trip(now)

    def _trip(self, now: float) -> None:
        self._tripped = True
        self._open_until = now + self.settings.open_seconds
        self._probe_since = None
        self.opened += 1

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker(tripped={self._tripped}, failures={self.consecutive_failures}, "
            f"opened={self.opened})"
        )
