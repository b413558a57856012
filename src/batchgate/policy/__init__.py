"""Pure policy objects: retry decisions, AIMD rate factors, circuit breakers, routing, header hints.

None of them does I/O or reads a clock: the caller passes the time in and applies the decision.

May import: `errors` and `models` only.
"""

from batchgate.policy.aimd import AimdController, AimdSettings
from batchgate.policy.circuit import CircuitBreaker, CircuitSettings, CircuitState, counts_as_failure
from batchgate.policy.hints import (
    parse_go_duration,
    parse_retry_hint,
    parse_rfc3339_delta,
    parse_should_retry,
)
from batchgate.policy.retry import RetryDecision, RetryPolicy, RetrySettings, is_retryable
from batchgate.policy.routing import choose_target

__all__ = [
    "AimdController",
    "AimdSettings",
    "CircuitBreaker",
    "CircuitSettings",
    "CircuitState",
    "RetryDecision",
    "RetryPolicy",
    "RetrySettings",
    "choose_target",
    "counts_as_failure",
    "is_retryable",
    "parse_go_duration",
    "parse_retry_hint",
    "parse_rfc3339_delta",
    "parse_should_retry",
]
