"""The policy package's public surface."""

from __future__ import annotations

from batchgate import policy


def test_exported_names() -> None:
    assert policy.__all__ == sorted(policy.__all__)
    assert set(policy.__all__) == {
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
    }
    for name in policy.__all__:
        assert getattr(policy, name) is not None
