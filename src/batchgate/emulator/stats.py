"""What each emulated provider saw, for the operator endpoint: admissions, rejections by reason,
faults injected, tokens charged, completions, duplicate prompts, a time series of admissions, and
when the first request arrived and the last request that succeeded was admitted (the span a
benchmark divides the quota's minimum time by).

The series has one point per 100 ms bucket that saw an admission: `[t, requests, tokens]`, where
`t` is the bucket's start in seconds since the emulator started (or was last reset) and `tokens` is
the total tokens charged at admission. Memory stays bounded: counters are fixed, the series grows
with elapsed time (not traffic), and the set of completed prompt hashes stops growing at
`MAX_FINGERPRINTS`.
"""

from __future__ import annotations

from typing import Any

from batchgate.emulator.config import FAULT_KINDS
from batchgate.emulator.limiter import RequestCost

SERIES_BUCKET_SECONDS = 0.1
MAX_FINGERPRINTS = 1_000_000
REJECT_REASONS: tuple[str, ...] = (
    "rate_limit",
    "concurrency",
    "invalid",
    "auth",
    "never_fits",
    "not_found",
    "unknown_model",
    "model_refused",
    "too_large",
)


class ProviderStats:
    """Counters for one provider since it started or was last reset."""

    __slots__ = (
        "_done",
        "admitted",
        "completed",
        "duplicates",
        "epoch",
        "faults",
        "first_request",
        "last_success_admitted",
        "rejected",
        "series",
        "tokens_input",
        "tokens_output",
        "tokens_total",
    )

    def __init__(self, now: float) -> None:
        self.reset(now)

    def reset(self, now: float) -> None:
        self.epoch = now
        self.first_request: float | None = None  # when the first request arrived (any answer)
        self.last_success_admitted: float | None = None  # latest admission that answered 200
        self.admitted = 0
        self.completed = 0
        self.duplicates = 0
        self.rejected: dict[str, int] = dict.fromkeys(REJECT_REASONS, 0)
        self.faults: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
        self.tokens_input = 0
        self.tokens_output = 0
        self.tokens_total = 0
        self.series: dict[int, list[int]] = {}
        self._done: set[int] = set()

    def seen(self, now: float) -> None:
        if self.first_request is None:
            self.first_request = now

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def fault(self, kind: str) -> None:
        self.faults[kind] += 1

    def admit(self, now: float, cost: RequestCost, fingerprint: int) -> None:
        self.admitted += 1
        self.tokens_input += cost.input_tokens
        self.tokens_output += cost.output_tokens
        self.tokens_total += cost.tokens
        if fingerprint in self._done:
            self.duplicates += 1
        bucket = int((now - self.epoch) / SERIES_BUCKET_SECONDS)
        point = self.series.get(bucket)
        if point is None:
            self.series[bucket] = [1, cost.tokens]
        else:
            point[0] += 1
            point[1] += cost.tokens

    def complete(self, fingerprint: int, admitted_at: float) -> None:
        self.completed += 1
        if self.last_success_admitted is None or admitted_at > self.last_success_admitted:
            self.last_success_admitted = admitted_at
        if len(self._done) < MAX_FINGERPRINTS:
            self._done.add(fingerprint)

    def to_dict(self) -> dict[str, Any]:
        return {
            "admitted": self.admitted,
            "completed": self.completed,
            "duplicates": self.duplicates,
            "rejected": dict(self.rejected),
            "faults": dict(self.faults),
            "tokens_charged": {
                "input": self.tokens_input,
                "output": self.tokens_output,
                "total": self.tokens_total,
            },
            "first_request_s": self._since_epoch(self.first_request),
            "last_success_admitted_s": self._since_epoch(self.last_success_admitted),
            "series_bucket_seconds": SERIES_BUCKET_SECONDS,
            "series": [
                [round(b * SERIES_BUCKET_SECONDS, 3), n, tokens]
                for b, (n, tokens) in sorted(self.series.items())
            ],
        }

    def _since_epoch(self, t: float | None) -> float | None:
        return None if t is None else round(t - self.epoch, 6)

    def __repr__(self) -> str:
        return f"ProviderStats(admitted={self.admitted}, completed={self.completed})"
