"""Waiting out an outage: a target that answered before and then cannot be reached is paused.

A provider that has answered this run and then stops answering (connection refused, a DNS
failure, connections reset, timeouts) is most likely restarting or behind a network blip: every
request sent to it now would fail, yet nothing says it is gone. So it is paused, not taken out:
requests for it wait (their attempts are not spent), and one request at a time probes it — the
first probe `FIRST_PROBE_S` after the pause began, then doubling to `MAX_PROBE_S` between
probes. A probe that gets any answer ends the pause (the caller clears it with the take-out's
`record_answer`); only an outage longer than `max_outage` seconds takes the target out
(`takeout.py`). An HTTP status, a 502 or 503 too, is an answer: a run of them is the retry
policy's and the circuit breaker's, bounded by `max_attempts` (a 503 is also how providers
refuse concurrency, shared/PROTOCOLS.md, which the quota learns from). Pure: the caller passes
the time in and tells which attempt was the probe.
"""

from __future__ import annotations

from batchgate.errors import ConnectError, RequestTimeout, UnreachableError

FIRST_PROBE_S = 1.0  # the first probe, this long after the pause began
MAX_PROBE_S = 30.0  # the longest wait between two probes


def outage_cause(error: BaseException) -> str | None:
    """Why `error` says a target that answered before is down for now (None: it says no such
    thing — an answer, or a failure of the request's own)."""
    if isinstance(error, UnreachableError):
        return error.cause
    if isinstance(error, ConnectError):
        return "connection broken"
    if isinstance(error, RequestTimeout):
        return "timed out"
    return None  # an HTTP status is an answer: a 5xx run is the retry policy's and the breaker's


class Pause:
    """One outage of one target: since when, and when its next probe may go."""

    def __init__(self, since: float, cause: str, now: float) -> None:
        self.since = since  # when the failures began
        self.cause = cause  # the latest failure's cause
        self.probing = False  # a probe is out and has not reported
        self.probes = 0  # probes sent
        self._delay = FIRST_PROBE_S
        self.next_probe = now + FIRST_PROBE_S

    def claim(self, now: float) -> bool:
        """Whether the caller may send the probe now (then it is the one out)."""
        if self.probing or now < self.next_probe:
            return False
        self.probing = True
        self.probes += 1
        return True

    def failed(self, cause: str, now: float) -> None:
        """The probe failed as the outage does: the next one after twice the wait (at most
        `MAX_PROBE_S`)."""
        self.cause = cause
        self.probing = False
        self._delay = min(self._delay * 2.0, MAX_PROBE_S)
        self.next_probe = now + self._delay

    def released(self) -> None:
        """The probe ended without a verdict (cancelled, stopped): another may go at once."""
        self.probing = False

    def lasted(self, now: float) -> float:
        return now - self.since

    def __repr__(self) -> str:
        return f"Pause(since={self.since}, cause={self.cause!r}, probes={self.probes})"
