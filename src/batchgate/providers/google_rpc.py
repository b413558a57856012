"""What a Google API error body says in its structured `error.details` (pure): the wait a 429
`RESOURCE_EXHAUSTED` asks for (`google.rpc.RetryInfo.retryDelay`, "34s"), a day's quota used up
(a `google.rpc.QuotaFailure` violation whose `quotaId` is per day, e.g.
`GenerateRequestsPerDayPerProjectPerModel`: Gemini's RPD, which resets at midnight Pacific time),
and a refused API key (`google.rpc.ErrorInfo` reason `API_KEY_INVALID`, which AI Studio answers
with a 400).

https://ai.google.dev/gemini-api/docs/rate-limits, https://ai.google.dev/api (errors),
https://cloud.google.com/apis/design/errors#error_details; shared/PROTOCOLS.md "Gemini".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s$")  # protobuf Duration's JSON form: "34s", "0.5s"


def _details(body: Any) -> list[Mapping[str, Any]]:
    error = body.get("error") if isinstance(body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    if not isinstance(details, list):
        return []
    return [d for d in details if isinstance(d, Mapping)]


def retry_delay(body: Any) -> float | None:
    """Seconds `RetryInfo.retryDelay` asks a client to wait; None when absent or garbled."""
    for detail in _details(body):
        if detail.get("@type") != RETRY_INFO:
            continue
        delay = detail.get("retryDelay")
        match = _DURATION.match(delay) if isinstance(delay, str) else None
        if match is not None:
            value = float(match.group(1))
            return value if math.isfinite(value) else None
    return None


def retry_headers(body: Any) -> dict[str, str]:
    """The wait `retry_delay` finds as a `retry-after-ms` header (the one form every retry path
    reads, `policy.hints.parse_retry_hint`); {} without one."""
    delay = retry_delay(body)
    return {} if delay is None else {"retry-after-ms": str(max(0, math.ceil(delay * 1000)))}


def api_key_invalid(body: Any) -> bool:
    """Whether the body says the API key was refused (a 400 that is an authentication failure)."""
    return any(d.get("@type") == ERROR_INFO and d.get("reason") == "API_KEY_INVALID" for d in _details(body))


def daily_quota_exhausted(body: Any) -> bool:
    """Whether a 429 says a per-day quota (RPD) is used up: no retry helps before the day ends."""
    for detail in _details(body):
        if detail.get("@type") != QUOTA_FAILURE:
            continue
        violations = detail.get("violations")
        for v in violations if isinstance(violations, list) else []:
            quota_id = v.get("quotaId") if isinstance(v, Mapping) else None
            if isinstance(quota_id, str) and "PerDay" in quota_id:
                return True
    return False
