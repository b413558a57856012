"""The family-agnostic core of the emulated Batch APIs: one batch's time-based processing, the
per-provider batch state (files, batches, enqueued-token quota) and the batch counters.

A `BatchRun` processes its items progressively: item i (0-based) of n is done at
`start + processing_seconds × (i + 1) / n`. Nothing polls: the run holds two clock timers (the end
of processing and the end of the completion window) and catches up lazily whenever it is observed
(`advance(now)`), so a GET in the middle of a run sees exactly the items due by then. An item is
answered with the emulator's own validation and content for its endpoint (`content.answer`/`fit`
and `openai_endpoints.answer_for`: chat, embeddings, responses or completions on the OpenAI family),
so a batch answer equals the live answer to the same request.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from batchgate.clock import Clock, TimerHandle
from batchgate.emulator.config import BatchConfig
from batchgate.emulator.content import answer, fit
from batchgate.emulator.openai_endpoints import answer_for, parse_for
from batchgate.emulator.provider import EmulatedProvider
from batchgate.emulator.wire import ApiError, Family, ParsedRequest, refuse_fields

Outcome = Literal["pending", "succeeded", "errored", "expired", "cancelled"]
RunStatus = Literal["in_progress", "cancelling", "ended"]
EndReason = Literal["completed", "expired", "cancelled"]
DAY_SECONDS = 24 * 3600.0
DOCUMENTED_LIMITS = {  # requests and bytes per input file (Azure: 100,000 and 200 MB, its batch guide)
    "openai": (50_000, 200 * 1024 * 1024),
    "azure": (100_000, 200 * 1024 * 1024),
    "anthropic": (100_000, 256 * 1024 * 1024),
    "gemini": (100_000, 2 * 1024 * 1024 * 1024),  # a 2 GB input file (batch-mode docs); no count given
}


@dataclass(slots=True)
class BatchItem:
    """One request of a batch: valid (`request`) or refused by its endpoint's validation (`error`)."""

    custom_id: str
    request: ParsedRequest | None = None
    error: ApiError | None = None
    outcome: Outcome = "pending"
    body: bytes | None = None  # the response body in its endpoint's shape, once succeeded
    output_tokens: int = 0


class BatchStats:
    """Batch counters of one provider since start or the last reset."""

    __slots__ = (
        "cancelled",
        "completed",
        "created",
        "expired",
        "failed",
        "refused",
        "rejected",
        "requests_errored",
        "requests_processed",
        "requests_succeeded",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.created = self.completed = self.expired = self.cancelled = self.failed = 0
        self.refused = self.rejected = 0  # 429 on creation (quota) / other 4xx answers
        self.requests_processed = self.requests_succeeded = self.requests_errored = 0

    def ended(self, reason: str) -> None:
        setattr(self, reason, getattr(self, reason) + 1)

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in sorted(self.__slots__)}


class BatchRun:
    """The processing of one batch's items over time; `on_end` is called once when it ends."""

    def __init__(
        self,
        items: list[BatchItem],
        family: Family,
        clock: Clock,
        stats: BatchStats,
        *,
        start: float,
        processing_seconds: float,
        expire_at: float,
        id_prefix: str,
        on_end: Callable[[BatchRun], None],
    ) -> None:
        self.items = items
        self.total = len(items)
        self.status: RunStatus = "in_progress"
        self.end_reason: EndReason | None = None
        self.done = 0
        self.succeeded = 0
        self.errored = 0
        self.prompt_tokens = 0  # of the succeeded items
        self.completion_tokens = 0
        self.cancel_wall: float | None = None
        self.ended_wall: float | None = None
        self._family = family
        self._clock = clock
        self._stats = stats
        self._start = start
        self._processing = processing_seconds
        self._id_prefix = id_prefix
        self._on_end = on_end
        self._timers: list[TimerHandle] = [
            clock.call_at(start + processing_seconds, self._finish),
            clock.call_at(expire_at, self._expire),
        ]

    @property
    def ended(self) -> bool:
        return self.status == "ended"

    def advance(self, now: float) -> None:
        """Process every item due by `now` (only while in progress)."""
        if self.status != "in_progress":
            return
        if self._processing <= 0:
            target = self.total
        else:
            target = min(self.total, math.floor(self.total * (now - self._start) / self._processing + 1e-9))
        self._process_until(target)

    def cancel(self, now: float) -> None:
        """Stop processing now; the run ends as cancelled on the next timer tick."""
        self.advance(now)
        if self.status != "in_progress":
            return
        self.status = "cancelling"
        self.cancel_wall = self._clock.wall()
        self._timers.append(self._clock.call_at(now, self._finish_cancel))

    def close(self) -> None:
        """Drop the timers (the server is stopping)."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    def _process_until(self, target: int) -> None:
        family = self._family
        for i in range(self.done, target):
            item = self.items[i]
            req = item.request
            if req is None:
                item.outcome = "errored"
                self.errored += 1
                self._stats.requests_errored += 1
            else:
                text, tokens, cut = fit(answer(req.prompt), req.max_tokens, family.count_text)
                body_id = f"{family.id_prefix}{self._id_prefix}{i:06x}"
                item.body = answer_for(family, req, text, tokens, cut, body_id, self._clock.wall())
                item.outcome = "succeeded"
                item.output_tokens = tokens * req.n
                self.succeeded += 1
                self.prompt_tokens += req.prompt_tokens
                self.completion_tokens += item.output_tokens
                self._stats.requests_succeeded += 1
            self._stats.requests_processed += 1
        self.done = max(self.done, target)

    def _finish(self) -> None:
        if self.status == "in_progress":
            self._process_until(self.total)
            self._end("completed")

    def _expire(self) -> None:
        if self.status == "in_progress":
            self.advance(self._clock.now())
            self._end("expired", "expired")

    def _finish_cancel(self) -> None:
        if self.status == "cancelling":
            self._end("cancelled", "cancelled")

    def _end(self, reason: EndReason, rest: Outcome | None = None) -> None:
        if rest is not None:
            for item in self.items[self.done :]:
                item.outcome = rest
        self.status = "ended"
        self.end_reason = reason
        self.ended_wall = self._clock.wall()
        self.close()
        self._on_end(self)

    def __repr__(self) -> str:
        return f"BatchRun({self.status}, done={self.done}/{self.total}, end={self.end_reason})"


@dataclass(slots=True)
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass(slots=True)
class BatchProvider:
    """The batch state of one emulated provider: its files, batches, quota in use and counters."""

    runtime: EmulatedProvider
    clock: Clock
    stats: BatchStats = field(default_factory=BatchStats)
    files: dict[str, StoredFile] = field(default_factory=dict)
    batches: dict[str, Any] = field(default_factory=dict)  # id -> the family's batch record
    enqueued_tokens: int = 0

    @property
    def config(self) -> BatchConfig:
        return self.runtime.config.batch

    @property
    def family(self) -> Family:
        return self.runtime.family

    @property
    def max_requests(self) -> int:
        return self.config.max_requests or DOCUMENTED_LIMITS[self.family.name][0]

    @property
    def max_bytes(self) -> int:
        return self.config.max_bytes or DOCUMENTED_LIMITS[self.family.name][1]

    @property
    def window_seconds(self) -> float:
        expire = self.config.expire_after_seconds
        return DAY_SECONDS if expire is None else expire

    def reserve(self, tokens: int) -> bool:
        """Take `tokens` of the enqueued-token quota, or False when they don't fit (nothing taken)."""
        limit = self.config.enqueued_token_limit
        if limit is not None and self.enqueued_tokens + tokens > limit:
            return False
        self.enqueued_tokens += tokens
        return True

    def release(self, tokens: int) -> None:
        self.enqueued_tokens = max(0, self.enqueued_tokens - tokens)

    def start_run(
        self, items: list[BatchItem], batch_id: str, on_end: Callable[[BatchRun], None]
    ) -> BatchRun:
        """Start processing `items` now, holding their prompt tokens until the run ends."""
        tokens = sum(item.request.prompt_tokens for item in items if item.request is not None)
        now = self.clock.now()

        def ended(run: BatchRun) -> None:
            self.release(tokens)
            self.stats.ended(run.end_reason or "completed")
            on_end(run)

        return BatchRun(
            items,
            self.family,
            self.clock,
            self.stats,
            start=now,
            processing_seconds=self.config.processing_seconds,
            expire_at=now + self.window_seconds,
            id_prefix=batch_id.rpartition("_")[2][-12:],
            on_end=ended,
        )

    def parse_item(self, custom_id: str, body: Any, endpoint: str = "chat") -> BatchItem:
        """A batch item: the body validated exactly as the live `endpoint` would."""
        try:
            refuse_fields(body, self.runtime.config.reject_fields)
            return BatchItem(custom_id, request=parse_for(self.family, endpoint, body, self.runtime.config))
        except ApiError as err:
            return BatchItem(custom_id, error=err)

    def close(self) -> None:
        for record in self.batches.values():
            run = getattr(record, "run", None)
            if run is not None:
                run.close()
