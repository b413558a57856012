"""Taking a target out of its routes: a provider that cannot serve anything, not just now.

A target that refuses the API key (401/403), cannot be reached at all (connection refused, DNS
failure) or fails the TLS handshake (a certificate not trusted: `TLSError`, its own cause, never
"unreachable") is not down for a moment: every further request would fail the same way. After `after`
such failures in a row, the target is out — its requests fail over to the route's other
targets, and a route with none left ends (`errors.NoTargetLeft`; `errors.RouteStopped` when
every target refused its key: that route's items fail, the job's other routes go on) — until,
after `readmit_seconds` (for a long-lived gateway: a server, a library user's), it is given its
tries again. A target that has answered before and then cannot be reached (refused, DNS,
resets, timeouts: `outage.outage_cause`) is paused instead after `after` such
failures in a row (`outage.Pause`: its requests wait while one probe at a time tests it) and is
taken out only when the outage has lasted `max_outage_seconds` (0: taken out at once, as a
target that never answered). Any other HTTP answer (a 200, a 429, a 500) shows the target
reachable and the key accepted: the run of failures starts again and a pause ends. For a target
that never answered, timeouts and broken connections prove nothing either way. Pure: the caller
passes the error and the time in; the circuit breaker holds one per target.

A key that may not use one model (a 403 or 404 `model_not_found`: `ModelRefusedError`) is not a
refused key: only that (provider, model) target is out (`ModelRefusals`, at the first refusal,
for `readmit_seconds` too), and the provider's other models go on. Its requests fail over to the
route's other targets; where none is left, each fails at once (`allowed`), never sent again at
the quota's pace, and the job goes on with its other models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

from batchgate.errors import (
    AuthenticationError,
    HTTPStatusError,
    ModelRefusedError,
    TLSError,
    UnreachableError,
)
from batchgate.policy.outage import Pause, outage_cause

C = TypeVar("C")
Verdict = Literal["out", "paused"]  # what one failure did to the target (None: nothing)


@dataclass(frozen=True, slots=True)
class TakeOutSettings:
    after: int = 3  # failures in a row that take a target out (0: never)
    max_outage_seconds: float = 1800.0  # how long a target that answered before is waited for
    readmit_seconds: float = 300.0  # how long a target stays out before it is tried again (0: never)

    def __post_init__(self) -> None:
        if self.after < 0:
            raise ValueError("take_out_after must not be negative")
        if self.max_outage_seconds < 0:
            raise ValueError("max_outage must not be negative")
        if self.readmit_seconds < 0:
            raise ValueError("take_out_for must not be negative")


def fatal_cause(error: BaseException) -> str | None:
    """Why `error` says the target cannot serve any request (None: it says no such thing)."""
    if isinstance(error, AuthenticationError):
        return f"API key refused (HTTP {error.status})" if error.status else "API key refused"
    if isinstance(error, UnreachableError):
        return error.cause
    if isinstance(error, TLSError):  # the server is there; its certificate is not trusted
        return error.cause
    return None


class TakeOut:
    """Whether one target is out, or paused; see the module docstring."""

    def __init__(self, settings: TakeOutSettings | None = None) -> None:
        self.settings = settings or TakeOutSettings()
        self.answered = False  # the target has answered a request (the key worked, it was there)
        self.streak = 0  # fatal failures in a row
        self._since: float | None = None  # when the streak began
        self._cause: str | None = None  # the streak's latest cause
        self.reason: str | None = None  # why the target is out; None while it is in
        self.key_refused = False  # out because its key was refused (not because it is unreachable)
        self.pause: Pause | None = None  # the outage being waited out; None while it answers
        self._out_at = 0.0
        self.models = ModelRefusals(self.settings)  # the provider's models its key may not use

    @property
    def out(self) -> bool:
        """Out as last seen (`is_out` also lets a target back in once its time is up)."""
        return self.reason is not None

    def is_out(self, now: float) -> bool:
        """Out at `now`; after `readmit_seconds` out, the target gets its tries again."""
        if self.reason is None:
            return False
        readmit = self.settings.readmit_seconds
        if readmit and now >= self._out_at + readmit:
            self.reason, self.streak, self._since, self.key_refused = None, 0, None, False
            return False
        return True

    def in_doubt(self, error: BaseException) -> bool:
        """Whether `error` puts the target, not the request, in question: a refused key or no
        connection before the target ever answered. Such a request is tried again (the run of
        failures decides); once the target has answered, a 401/403 is the request's own."""
        if self.settings.after == 0 or self.out or self.answered:
            return False
        return fatal_cause(error) is not None

    def record_answer(self) -> None:
        """The target answered (a success, or an HTTP status that is not 401/403): a pause ends."""
        self.answered = True
        self.streak = 0
        self._since = None
        self.pause = None

    def _cause_of(self, error: BaseException) -> str | None:
        cause = fatal_cause(error)
        if cause is None and self.answered:
            cause = outage_cause(error)
        return cause

    def record(self, error: BaseException, now: float, *, probe: bool = False) -> Verdict | None:
        """One failed attempt at the target (`probe`: the pause's probe): "out" when it takes the
        target out (once), "paused" while the target is paused (its request waits, its attempt
        not spent), None otherwise."""
        cause = self._cause_of(error)
        if cause is None:
            if isinstance(error, HTTPStatusError):
                self.record_answer()
            return None
        if self.is_out(now) or self.settings.after == 0:
            return None
        self._cause = cause
        if self.pause is not None:
            return self._while_paused(cause, now, probe)
        self.streak += 1
        if self._since is None:
            self._since = now
        if self.streak < self.settings.after:
            return None
        refused = isinstance(error, AuthenticationError)
        if self.answered and not refused and self.settings.max_outage_seconds > 0:
            self.pause = Pause(self._since, cause, now)
            return "paused"
        self._take_out(now, self._describe(now), refused)
        return "out"

    def _while_paused(self, cause: str, now: float, probe: bool) -> Verdict:
        pause = self.pause
        assert pause is not None
        if probe:
            pause.failed(cause, now)
        if pause.lasted(now) < self.settings.max_outage_seconds:
            return "paused"
        self.pause = None
        waited = f"{cause}, waited {pause.lasted(now):.0f}s (max_outage) and {pause.probes} probes"
        self._take_out(now, waited, False)
        return "out"

    def _take_out(self, now: float, reason: str, refused: bool) -> None:
        self.reason, self._out_at, self.key_refused = reason, now, refused

    def _describe(self, now: float) -> str:
        text = f"{self._cause}, {self.streak} times in a row"
        if self.answered:
            text += f" over {now - (self._since or now):.0f}s"
        return text

    def __repr__(self) -> str:
        return f"TakeOut(streak={self.streak}, answered={self.answered}, reason={self.reason!r})"


def stop_line(model: str, targets: Iterable[tuple[str, TakeOut]]) -> str:
    """Every target of the route is out: which, and why (never a key, never a provider's text)."""
    why = "; ".join(f"provider {name} taken out: {out.reason}" for name, out in targets if out.out)
    return f"{why}; no target left for model {model!r}"


class ModelRefusals:
    """The models one provider's key may not use; see the module docstring."""

    def __init__(self, settings: TakeOutSettings) -> None:
        self.settings = settings
        self._out: dict[str, tuple[float, str]] = {}  # model -> (taken out at, why)

    def record(self, error: BaseException, model: str, now: float) -> bool | None:
        """One failed attempt at `model`: None when `error` is no refusal of it (or take-outs are
        off: then it is the request's own failure); else True when it takes `model` out now, False
        when `model` was out already (an attempt sent before it was)."""
        if not isinstance(error, ModelRefusedError) or self.settings.after == 0:
            return None
        if self.reason(model, now) is not None:
            return False
        status = f"HTTP {error.status} model_not_found"
        self._out[model] = (now, f"provider {error.provider}'s key may not use model {model!r} ({status})")
        return True

    def reason(self, model: str, now: float) -> str | None:
        """Why `model` is out at `now`; None while it is in (again after `readmit_seconds`)."""
        entry = self._out.get(model)
        if entry is None:
            return None
        readmit = self.settings.readmit_seconds
        if readmit and now >= entry[0] + readmit:
            del self._out[model]
            return None
        return entry[1]


def allowed(
    candidates: list[C],
    refused: Callable[[C], str | None],
    model: str,
    error: BaseException | None = None,
) -> list[C]:
    """The candidates whose model their provider's key may use (`refused(c)`: why not, or None).
    None left: `error` (the refusal just answered) or a `ModelRefusedError` naming every refusal
    — this request's failure alone; never sent, as the route has nothing it may use."""
    marked = [(c, refused(c)) for c in candidates]
    left = [c for c, why in marked if why is None]
    if left or not candidates:
        return left
    if error is not None:
        raise error
    reasons = "; ".join(why for _, why in marked if why is not None)
    raise ModelRefusedError(f"{reasons}; no target left for model {model!r}")
