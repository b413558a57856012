"""The retry policy: a pure decision — retry or not, after how long, and why.

Errors are classified by type (batchgate.errors), never by message text. Transport failures,
408/409, 429, 5xx and 529 are retried; other 4xx, exhausted quota or spend limits, requests that
can never fit and routing failures are not. A provider's `x-should-retry` header overrides the
type, but nothing goes past `max_attempts`; an answer no retry can read (`UnusableAnswer`: a
head or body past the client's bound, a status line that is not HTTP) ends the request by its
`UNUSABLE_ATTEMPTS`th try (each try is paid for and answered the same). The delay is the
provider's hint when it sent a sane one (capped at `max_hint`), otherwise exponential backoff with
full jitter from an injected rng.
Backoff protects a provider in trouble, so it grows with the provider's own run of failures
(`streak`: consecutive failures with no success between them, across all its requests) as
well as with this request's tries: one unlucky request on a provider that answers the rest
retries after the first step's wait, not after doubling waits that would hold a batch's tail. The
caller applies the decision (sleeping on its Clock); this module never sleeps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from batchgate.errors import (
    AuthenticationError,
    BadRequestError,
    NeverFitsError,
    OverloadedError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitError,
    RetryableStatusError,
    RoutingError,
    ServerError,
    TransportError,
    UnusableAnswer,
)
from batchgate.policy.hints import parse_retry_hint, parse_should_retry

# Order matters only for readability: the two tuples are disjoint.
RETRYABLE: tuple[type[BaseException], ...] = (
    TransportError,
    RateLimitError,
    OverloadedError,
    ServerError,
    RetryableStatusError,
)
UNUSABLE_ATTEMPTS = 2  # the most tries a request gets once an answer cannot be read as sent

NEVER_RETRIED: tuple[type[BaseException], ...] = (
    AuthenticationError,
    BadRequestError,
    QuotaExhaustedError,
    NeverFitsError,
    RoutingError,
)


@dataclass(frozen=True, slots=True)
class RetrySettings:
    max_attempts: int = 8  # total tries, the first included
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_hint: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_hint < 0:
            raise ValueError("retry delays must not be negative")


@dataclass(frozen=True, slots=True)
class RetryDecision:
    retry: bool
    delay: float  # seconds to wait before the next try (0 when not retrying)
    reason: str
    hinted: bool  # the delay came from the provider's retry-after header


def is_retryable(error: BaseException) -> bool:
    """Whether the error's type is worth another try (headers not considered)."""
    return isinstance(error, RETRYABLE) and not isinstance(error, NEVER_RETRIED)


def _describe(error: BaseException) -> str:
    kind = getattr(error, "kind", None)
    return kind if isinstance(kind, str) else type(error).__name__


class RetryPolicy:
    """Decides, for an error after `attempt` tries, whether and when to try again."""

    def __init__(self, settings: RetrySettings | None = None, rng: random.Random | None = None) -> None:
        self.settings = settings or RetrySettings()
        self._rng = rng or random.Random()

    def backoff(self, attempt: int) -> float:
        """Full jitter: uniform over [0, min(max_delay, base × 2^(attempt−1))]."""
        s = self.settings
        ceiling = min(s.max_delay, s.base_delay * 2.0 ** min(attempt - 1, 64))
        return self._rng.uniform(0.0, ceiling)

    def decide(
        self, error: BaseException, attempt: int, wall_now: float, *, streak: int | None = None
    ) -> RetryDecision:
        """`attempt`: tries made so far; `streak`: the provider's consecutive failures, this one
        included (None: unknown, the backoff follows the tries alone)."""
        if attempt < 1:
            raise ValueError(f"attempt counts tries made so far and starts at 1, got {attempt}")
        s = self.settings
        what = _describe(error)
        headers = error.headers if isinstance(error, ProviderError) else {}
        override = parse_should_retry(headers)
        if override is None:
            retry = is_retryable(error)
            why = f"{what} is retryable" if retry else f"{what} is never retried"
        else:
            retry = override
            why = f"x-should-retry: {'true' if override else 'false'} on {what}"
        if not retry:
            return RetryDecision(False, 0.0, why, hinted=False)
        most = min(s.max_attempts, UNUSABLE_ATTEMPTS) if isinstance(error, UnusableAnswer) else s.max_attempts
        if attempt >= most:
            why = f"{what}: gave up after {attempt} of {most} attempts"
            return RetryDecision(False, 0.0, why, hinted=False)
        hint = parse_retry_hint(headers, wall_now, max_hint=s.max_hint)
        if hint is not None:
            return RetryDecision(True, hint, f"{why}; provider asked to wait {hint:.3g}s", hinted=True)
        step = attempt if streak is None else max(1, min(attempt, streak))
        return RetryDecision(True, self.backoff(step), f"{why}; backoff after try {attempt}", hinted=False)

    def __repr__(self) -> str:
        return f"RetryPolicy({self.settings!r})"
