"""What batch mode did, as report figures, pure (no I/O): the counters of one run
(`BatchModeStats`) and their sum over the runs of a resumed job (`merge_batch_stats`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from batchgate.jobs.store.protocol import TaskOutcome, TaskState


@dataclass(slots=True)
class BatchModeStats:
    """What the runner did, for the report. Costs are at the Batch API price; `live_cost_usd` is
    what the same answers would have cost live (the saving is the difference)."""

    batches_submitted: int = 0
    batches_resumed: int = 0
    creation_refused: int = 0  # 429s (quota) and transient errors on creation
    batches_ended: dict[str, int] = field(default_factory=dict)  # by provider state
    succeeded: int = 0
    failed: int = 0
    resubmitted: int = 0  # items put into a new batch
    sent_live: int = 0  # items handed back to be sent live
    cost_usd: float = 0.0
    live_cost_usd: float = 0.0
    # per provider: items, succeeded, failed, prompt_tokens, completion_tokens, cost_usd, live_cost_usd
    by_provider: dict[str, dict[str, float]] = field(default_factory=dict)

    def add_outcome(self, outcome: TaskOutcome, live_cost: float) -> None:
        if outcome.state is TaskState.SUCCEEDED:
            self.succeeded += 1
        else:
            self.failed += 1
        self.cost_usd += outcome.cost_usd
        self.live_cost_usd += live_cost
        into = self.by_provider.setdefault(
            outcome.provider or "?",
            dict.fromkeys(("items", "succeeded", "failed", "prompt_tokens", "completion_tokens"), 0)
            | {"cost_usd": 0.0, "live_cost_usd": 0.0},
        )
        into["items"] += 1
        into["succeeded" if outcome.state is TaskState.SUCCEEDED else "failed"] += 1
        into["prompt_tokens"] += outcome.prompt_tokens
        into["completion_tokens"] += outcome.completion_tokens
        into["cost_usd"] += outcome.cost_usd
        into["live_cost_usd"] += live_cost

    def ended(self, state: str) -> None:
        self.batches_ended[state] = self.batches_ended.get(state, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def merge_batch_stats(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum the `BatchModeStats.to_dict()` of several runs (numbers and nested counts add up)."""
    merged: dict[str, Any] = BatchModeStats().to_dict()
    for part in parts:
        _add_into(merged, part)
    merged["cost_usd"] = round(float(merged["cost_usd"]), 6)
    merged["live_cost_usd"] = round(float(merged["live_cost_usd"]), 6)
    merged["saving_usd"] = round(merged["live_cost_usd"] - merged["cost_usd"], 6)
    return merged


def _add_into(into: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, Mapping):
            _add_into(into.setdefault(key, {}), value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value
