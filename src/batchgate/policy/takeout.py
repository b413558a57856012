"""Taking a target out of its routes: a provider that cannot serve anything, not just now.

A target that refuses the API key (401/403), cannot be reached at all (connection refused, DNS
failure) or fails the TLS handshake (a certificate not trusted: `TLSError`, its own cause, never
"unreachable") is not down for a moment: every further request would fail the same way. After `after`
such failures in a row, the target is out — its requests fail over to the route's other
targets, and a route with none left stops the job (`errors.NoTargetLeft`) — until, after
`readmit_seconds` (for a long-lived gateway: a server, a library user's), it is given its tries
again. A target
that has answered before is given `grace_seconds` more of failing (a restart, a DNS blip, a key
being rotated) before it is taken out, while its circuit breaker paces the probes. Any other
HTTP answer (a 200, a 429, a 500) shows the target reachable and the key accepted: the run of
failures starts again. Timeouts and broken connections prove nothing either way. Pure: the
caller passes the error and the time in; the circuit breaker holds one per target.

A key that may not use one model (a 403 or 404 `model_not_found`: `ModelRefusedError`) is not a
refused key: only that (provider, model) target is out (`ModelRefusals`, at the first refusal,
for `readmit_seconds` too), and the provider's other models go on. Its requests fail over to the
route's other targets; where none is left, each fails at once (`allowed`), never sent again at
the quota's pace, and the job goes on with its other models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from batchgate.errors import (
    AuthenticationError,
    HTTPStatusError,
    ModelRefusedError,
    TLSError,
    UnreachableError,
)

C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class TakeOutSettings:
    after: int = 3  # failures in a row that take a target out (0: never)
    grace_seconds: float = 30.0  # how long a target that answered before must keep failing
    readmit_seconds: float = 300.0  # how long a target stays out before it is tried again (0: never)

    def __post_init__(self) -> None:
        if self.after < 0:
            raise ValueError("take_out_after must not be negative")
        if self.grace_seconds < 0:
            raise ValueError("take_out_grace must not be negative")
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
    """Whether one target is out; see the module docstring."""

    def __init__(self, settings: TakeOutSettings | None = None) -> None:
        self.settings = settings or TakeOutSettings()
        self.answered = False  # the target has answered a request (the key worked, it was there)
        self.streak = 0  # fatal failures in a row
        self._since: float | None = None  # when the streak began
        self._cause: str | None = None  # the streak's latest cause
        self.reason: str | None = None  # why the target is out; None while it is in
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
            self.reason, self.streak, self._since = None, 0, None
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
        """The target answered (a success, or an HTTP status that is not 401/403)."""
        self.answered = True
        self.streak = 0
        self._since = None

    def record(self, error: BaseException, now: float) -> bool:
        """One failed attempt at the target; True when it takes the target out (once)."""
        cause = fatal_cause(error)
        if cause is None:
            if isinstance(error, HTTPStatusError):
                self.record_answer()
            return False
        if self.is_out(now) or self.settings.after == 0:
            return False
        self.streak += 1
        self._cause = cause
        if self._since is None:
            self._since = now
        if self.streak < self.settings.after:
            return False
        if self.answered and now - self._since < self.settings.grace_seconds:
            return False
        self.reason, self._out_at = self._describe(now), now
        return True

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
