"""What batch mode did, as report figures, pure (no I/O): the counters of one run
(`BatchModeStats`) and their sum over the runs of a resumed job (`merge_batch_stats`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import cast

from batchgate.jobs.progress.shapes import BatchCounters, BatchProviderCounters
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
    by_provider: dict[str, BatchProviderCounters] = field(default_factory=dict)

    def add_outcome(self, outcome: TaskOutcome, live_cost: float) -> None:
        if outcome.state is TaskState.SUCCEEDED:
            self.succeeded += 1
        else:
            self.failed += 1
        self.cost_usd += outcome.cost_usd
        self.live_cost_usd += live_cost
        into = self.by_provider.setdefault(
            outcome.provider or "?",
            BatchProviderCounters(
                items=0,
                succeeded=0,
                failed=0,
                prompt_tokens=0,
                completion_tokens=0,
                cost_usd=0.0,
                live_cost_usd=0.0,
            ),
        )
        into["items"] += 1
        if outcome.state is TaskState.SUCCEEDED:
            into["succeeded"] += 1
        else:
            into["failed"] += 1
        into["prompt_tokens"] += outcome.prompt_tokens
        into["completion_tokens"] += outcome.completion_tokens
        into["cost_usd"] += outcome.cost_usd
        into["live_cost_usd"] += live_cost

    def ended(self, state: str) -> None:
        self.batches_ended[state] = self.batches_ended.get(state, 0) + 1

    def to_dict(self) -> BatchCounters:
        """The counters as a run segment keeps them (`dataclasses.asdict`'s keys and order)."""
        return {
            "batches_submitted": self.batches_submitted,
            "batches_resumed": self.batches_resumed,
            "creation_refused": self.creation_refused,
            "batches_ended": dict(self.batches_ended),
            "succeeded": self.succeeded,
            "failed": self.failed,
            "resubmitted": self.resubmitted,
            "sent_live": self.sent_live,
            "cost_usd": self.cost_usd,
            "live_cost_usd": self.live_cost_usd,
            "by_provider": {name: BatchProviderCounters(**p) for name, p in self.by_provider.items()},
        }


def merge_batch_stats(parts: Iterable[BatchCounters]) -> BatchCounters:
    """Sum the `BatchModeStats.to_dict()` of several runs (numbers and nested counts add up)."""
    merged: dict[str, object] = dict(BatchModeStats().to_dict())
    for part in parts:
        _add_into(merged, part)
    done = cast("BatchCounters", merged)  # the same keys, summed; a stored part's unknown keys kept
    done["cost_usd"] = round(float(done["cost_usd"]), 6)
    done["live_cost_usd"] = round(float(done["live_cost_usd"]), 6)
    done["saving_usd"] = round(done["live_cost_usd"] - done["cost_usd"], 6)
    return done


def _add_into(into: dict[str, object], part: Mapping[str, object]) -> None:
    """Numbers add up and mappings merge, key by key (a stored segment's JSON, any version)."""
    for key, value in part.items():
        if isinstance(value, Mapping):
            nested = into.setdefault(key, {})
            if isinstance(nested, dict):
                _add_into(nested, value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            before = into.get(key, 0)
            into[key] = (before if isinstance(before, int | float) else 0) + value
