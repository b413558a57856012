"""What batch mode is doing, pure (no I/O): the open batches' latest states for the live display and
`batchgate status` (`OpenBatches`). The run's counters for the report are `jobs.report.batch_figures`."""

from __future__ import annotations

from dataclasses import dataclass

from batchgate.jobs.progress.shapes import BatchView, OpenBatch
from batchgate.providers.batch.common import BatchStatus

SHOWN_OPEN = 20  # open batches listed one by one in a snapshot


@dataclass(slots=True)
class _Open:
    provider: str
    batch_id: str
    requests: int
    round: int
    state: str = "submitted"
    processed: int = 0  # items the provider has answered so far (succeeded or errored)


class OpenBatches:
    """The batches a run follows, with the last status polled for each."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}

    def add(self, key: str, provider: str, batch_id: str, requests: int, round_no: int) -> None:
        self._open[key] = _Open(provider, batch_id, requests, round_no)

    def update(self, key: str, status: BatchStatus) -> None:
        entry = self._open.get(key)
        if entry is not None:
            entry.state = status.state
            entry.processed = status.counts.succeeded + status.counts.errored

    def remove(self, key: str) -> None:
        self._open.pop(key, None)

    def __len__(self) -> int:
        return len(self._open)

    def summary(self) -> BatchView:
        """`{open, items, processed, by_state, batches: [...]}` for a progress snapshot."""
        by_state: dict[str, int] = {}
        for entry in self._open.values():
            by_state[entry.state] = by_state.get(entry.state, 0) + 1
        return {
            "open": len(self._open),
            "items": sum(e.requests for e in self._open.values()),
            "processed": sum(e.processed for e in self._open.values()),
            "by_state": by_state,
            "batches": [_shown(e) for e in list(self._open.values())[:SHOWN_OPEN]],
        }


def _shown(e: _Open) -> OpenBatch:
    return {
        "provider": e.provider,
        "batch_id": e.batch_id,
        "requests": e.requests,
        "round": e.round,
        "state": e.state,
        "processed": e.processed,
    }
