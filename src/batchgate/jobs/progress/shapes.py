"""A running job's documents, typed: the progress snapshot (`Snapshot`, with a row per provider)
that the displays show, `--progress json` prints, the job store keeps for `batchgate status` and
the Python API hands to its callback; and batch mode's view of a run (`BatchView`: its open
batches and its counters, `BatchCounters`, which run segments keep for the report).

TypedDicts, because the JSON is a public shape: a snapshot read back from the store may come from
an older batchgate, so readers take a figure it may lack with a default. Key order is the JSON's:
each document is written as a literal in that order. The snapshot's one serializer is
`snapshot_json`."""

from __future__ import annotations

from typing import TypedDict, cast

import orjson


class BatchProviderCounters(TypedDict, total=False):
    """One provider's batch items in a run's counters (a segment stored before the per-provider
    item states and tokens were counted has `items` and the costs alone)."""

    items: float
    succeeded: float
    failed: float
    prompt_tokens: float
    completion_tokens: float
    cost_usd: float
    live_cost_usd: float


class BatchCounters(TypedDict, total=False):
    """Batch mode's counters of a run (`BatchModeStats.to_dict`); merged over runs they gain
    `saving_usd` (`merge_batch_stats`)."""

    batches_submitted: int
    batches_resumed: int
    creation_refused: int
    batches_ended: dict[str, int]
    succeeded: int
    failed: int
    resubmitted: int
    sent_live: int
    cost_usd: float
    live_cost_usd: float
    by_provider: dict[str, BatchProviderCounters]
    saving_usd: float


class OpenBatch(TypedDict):
    provider: str
    batch_id: str
    requests: int
    round: int
    state: str
    processed: int


class BatchView(TypedDict, total=False):
    """What a run with batch mode shows of it (`BatchDriver.view`; empty before it starts)."""

    open: int
    items: int
    processed: int
    by_state: dict[str, int]
    batches: list[OpenBatch]  # the first few open batches
    stats: BatchCounters


class Unreachable(TypedDict):
    cause: str
    attempts: int


class ProviderRow(TypedDict, total=False):
    """One provider's row of a snapshot (`counters.provider_entry`)."""

    requests: int
    ok: int
    errors: int
    rate_limited: int
    retries: int
    errors_by_kind: dict[str, int]
    in_flight: int
    waiting: int
    quota_used: dict[str, float]
    quota_learned: bool
    tokens: int
    p50_ms: float
    p95_ms: float
    cost_usd: float
    batch_cost_usd: float
    state: str
    circuit: str
    paused_since: float | None
    unreachable: Unreachable | None


class SnapshotBatches(TypedDict):
    open: int
    items: int
    processed: int
    by_state: dict[str, int]
    submitted: int
    resumed: int
    ended: dict[str, int]
    list: list[OpenBatch]


class BudgetView(TypedDict, total=False):
    """The budget used against its limits (`BudgetGuard.view`)."""

    spent_usd: float
    max_usd: float | None
    spent_tokens: int
    max_tokens: int | None


class Snapshot(TypedDict, total=False):
    """The figures every display shows (`counters.snapshot`)."""

    event: str  # "progress"
    job: str
    time: float
    total: int
    done: int
    succeeded: int
    failed: int
    done_before: int
    pending: int
    in_flight: int
    waiting: int
    backing_off: int
    waiting_for: dict[str, int]
    rate_per_s: float
    eta_s: float | None
    eta_step: str | None
    stalled_s: float | None
    total_growing: bool
    rate_limited: int
    retries: int
    errors_by_kind: dict[str, int]
    unreachable: list[str]
    tokens: int
    cost_usd: float
    budget: BudgetView | None
    elapsed_s: float
    providers: dict[str, ProviderRow]
    batches: SnapshotBatches  # with batch mode only


def snapshot_json(snap: Snapshot) -> bytes:
    """The snapshot's one serializer: a `--progress json` line, the store's `live` blob."""
    return orjson.dumps(snap)


def load_snapshot(blob: bytes) -> Snapshot:
    """A snapshot the store kept (`batchgate status`), as the running job wrote it."""
    return cast("Snapshot", orjson.loads(blob))
