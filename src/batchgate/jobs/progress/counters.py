"""A running job's figures (`Progress`, read into a snapshot by `snapshot`), and three ways to
show them — a live rich display (terminal), JSON-lines events (scripts), or nothing (quiet)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Protocol

import orjson

from batchgate.errors import JobError
from batchgate.jobs.progress.eta import Eta, EtaView
from batchgate.jobs.progress.shapes import (
    BatchView,
    Snapshot,
    snapshot_json,
)
from batchgate.jobs.store.protocol import TaskOutcome, TaskState

LIVE_BLOB = "live"  # the job's latest snapshot, stored every few seconds for `batchgate status`

MAX_LISTED_INVALID = 1000  # invalid custom_ids kept for the display and the report


@dataclass(slots=True)
class ProviderTally:
    """One provider's share of one job's live traffic, from its results' attempts: the job's
    timeline samples the counters, and a server job's report shows them (`provider_figures`).
    `latency_ms` sums every attempt's latency, so a sample pair gives the mean between."""

    attempts: int = 0
    answered: int = 0  # results this provider answered successfully
    rate_limited: int = 0  # 429s
    errors: int = 0  # failed attempts of any kind
    latency_ms: float = 0.0
    retries: int = 0  # failed attempts followed by another attempt of the same request
    wasted_tokens: int = 0  # tokens charged for failed attempts
    prompt_tokens: int = 0  # of the answers this provider gave
    completion_tokens: int = 0
    unreachable_attempts: int = 0
    unreachable_cause: str | None = None  # "connection refused", ... when a request ended so
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    retries_by_kind: dict[str, int] = field(default_factory=dict)  # retries by the error that cost them


@dataclass(frozen=True, slots=True)
class Before:
    """What a run found in the store when it started: its job's finished tasks and kept tokens."""

    succeeded: int
    failed: int
    prompt_tokens: int
    completion_tokens: int


@dataclass(slots=True)
class Progress:
    """Live figures of one run (one process), kept by the engine and read by the displays.

    `prompt_tokens`/`completion_tokens` count the answers kept; `validation_tokens` the answers
    rejected by the output check (billed all the same); `cost_usd` is everything billed.
    `latency` holds per-provider latency histograms (see `report.hist_add`) so runs can be merged.
    `cost_by_provider` counts live and batch answers; `batch_cost_by_provider` the batch ones only.
    `batch_view`, set by a run with batch mode, returns its open batches and batch counters.
    `tallies` count the job's own live attempts per provider (`provider_figures.tally_result`).
    Its fields are written only through its methods (the engine, a live task, batch mode and the
    tallies call them); displays, reports and metrics read the fields.
    """

    started: float
    total: int
    done_before: int = 0  # terminal tasks from earlier runs
    before: Before | None = None  # what earlier runs left in the store, once the run has read it
    succeeded: int = 0
    failed: int = 0
    invalid: int = 0
    in_flight: int = 0
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    validation_tokens: int = 0
    retry_extra_tokens: int = 0  # failed attempts' charged tokens + validation_tokens
    invalid_ids: list[str] = field(default_factory=list)
    cost_by_provider: dict[str, float] = field(default_factory=dict)
    validation_by_provider: dict[str, int] = field(default_factory=dict)
    latency: dict[str, dict[str, int]] = field(default_factory=dict)
    batch_cost_by_provider: dict[str, float] = field(default_factory=dict)
    tallies: dict[str, ProviderTally] = field(default_factory=dict)  # this job's live attempts
    batch_view: Callable[[], BatchView] | None = None
    shared_gateway: bool = False  # the gateway runs other jobs too (a server): its counters are not ours
    step_sizes: dict[str, int] = field(default_factory=dict)  # a graph job: tasks each step may hold
    ended_by_step: dict[str, int] = field(default_factory=dict)  # this run's ends per step ("" plain)
    eta: Eta = field(default_factory=Eta)

    def batches(self) -> BatchView:
        """The batch view (empty when the run has no batch mode)."""
        return self.batch_view() if self.batch_view is not None else {}

    @property
    def done(self) -> int:
        return self.done_before + self.succeeded + self.failed

    @property
    def total_growing(self) -> bool:
        """A fan-out or pipeline job whose later steps' tasks are still being added."""
        return bool(self.step_sizes) and self.total < sum(self.step_sizes.values())

    def eta_view(self, now: float) -> EtaView:
        """The ETA at `now` (the run's clock): from the step that binds, or `stalled`. Tasks
        ended by earlier runs of a graph job are shared evenly between its steps."""
        ended = self.ended_by_step
        if not self.step_sizes:
            return self.eta.observe(now, ended, {"": max(0, self.total - self.done)})
        before = self.done_before // len(self.step_sizes)
        left = {k: max(0, n - before - ended.get(k, 0)) for k, n in self.step_sizes.items()}
        return self.eta.observe(now, ended, left)

    def begin(self, total: int, before: Before) -> None:
        """The job's tasks and what earlier runs left of them, read as the run starts."""
        self.total, self.done_before, self.before = total, before.succeeded + before.failed, before

    def grow(self, added: int) -> None:
        """Tasks a pipeline's later steps added as earlier ones ended."""
        self.total += added

    def expect_steps(self, sizes: dict[str, int]) -> None:
        """A graph job: the most tasks each step may hold (for the ETA)."""
        self.step_sizes = sizes

    def watch_batches(self, view: Callable[[], BatchView]) -> None:
        """A run with batch mode: where its open batches and batch counters are read."""
        self.batch_view = view

    def sending(self, delta: int) -> None:
        """A call went out (+1) or came back (-1)."""
        self.in_flight += delta

    def charge_retry(self, tokens: int) -> None:
        """A failed attempt's billed tokens."""
        self.retry_extra_tokens += tokens

    def latency_hist(self, provider: str) -> dict[str, int]:
        """The job's latency histogram for `provider` (made on its first attempt)."""
        return self.latency.setdefault(provider, {})

    def record(self, outcome: TaskOutcome, step: str | None = None) -> None:
        """A task's outcome, live or batch: counted done (for its step), and the kept answer's tokens."""
        key = step or ""
        self.ended_by_step[key] = self.ended_by_step.get(key, 0) + 1
        if outcome.state is TaskState.SUCCEEDED:
            self.succeeded += 1
            self.prompt_tokens += outcome.prompt_tokens
            self.completion_tokens += outcome.completion_tokens
        else:
            self.failed += 1

    def tally(self, provider: str) -> ProviderTally:
        """The job's counters for `provider` (made on its first attempt)."""
        found = self.tallies.get(provider)
        if found is None:
            found = self.tallies[provider] = ProviderTally()
        return found

    def add_cost(self, provider: str | None, cost: float, *, batch: bool = False) -> None:
        """What a call (live) or an answer (batch) was billed, as it is billed."""
        self.cost_usd += cost
        if provider is not None:
            self.cost_by_provider[provider] = self.cost_by_provider.get(provider, 0.0) + cost
            if batch:
                by = self.batch_cost_by_provider
                by[provider] = by.get(provider, 0.0) + cost

    def count_refused(self, provider: str | None, tokens: int) -> None:
        """An answer the output check refused: its tokens were billed, the answer is not kept."""
        self.validation_tokens += tokens
        self.retry_extra_tokens += tokens
        if provider is not None:
            by = self.validation_by_provider
            by[provider] = by.get(provider, 0) + tokens

    def count_invalid(self, custom_id: str) -> None:
        """A task ended as `invalid_output` (the first `MAX_LISTED_INVALID` are listed)."""
        self.invalid += 1
        if len(self.invalid_ids) < MAX_LISTED_INVALID:
            self.invalid_ids.append(custom_id)


class Reachability:
    """Tells a sink `provider_unreachable` when a provider stops answering (refused, DNS) and
    `provider_reachable` when it answers again — as it happens, not only in the report."""

    def __init__(self, sink: ProgressSink) -> None:
        self._sink = sink
        self._gone: set[str] = set()

    def see(self, snap: Snapshot) -> None:
        for name, p in snap["providers"].items():
            gone = p["unreachable"]
            if gone is not None and name not in self._gone:
                self._gone.add(name)
                self._sink.event("provider_unreachable", job=snap["job"], provider=name, **gone)
            elif gone is None and name in self._gone:
                self._gone.discard(name)
                self._sink.event("provider_reachable", job=snap["job"], provider=name)


class ProgressSink(Protocol):
    def event(self, name: str, **fields: object) -> None: ...

    def update(self, snap: Snapshot) -> None: ...

    def close(self) -> None: ...


class QuietSink:
    def event(self, name: str, **fields: object) -> None:
        return None

    def update(self, snap: Snapshot) -> None:
        return None

    def close(self) -> None:
        return None


class JsonLinesSink:
    """One JSON object per line on stdout: `started`, `progress` (each tick), then `finished` or
    `stopped` (with the exit code, the files written and how to resume). Nothing else goes to stdout."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream or sys.stdout

    def _write(self, line: bytes) -> None:
        self._stream.write(line.decode() + "\n")
        self._stream.flush()

    def event(self, name: str, **fields: object) -> None:
        self._write(orjson.dumps({"event": name, **fields}))

    def update(self, snap: Snapshot) -> None:
        self._write(snapshot_json(snap))

    def close(self) -> None:
        return None


def make_sink(mode: str, every_s: float = 10.0) -> ProgressSink:
    """`json`, `quiet`, `rich`, or `auto`: the live display on a terminal, else a progress line
    on stderr every `every_s` seconds (`lines`)."""
    if mode == "json":
        return JsonLinesSink()
    if mode == "quiet":
        return QuietSink()
    if mode == "lines" or (mode == "auto" and not sys.stderr.isatty()):
        from batchgate.jobs.progress.progress_lines import LineSink  # noqa: PLC0415 — only when asked for

        return LineSink(every_s)
    if importlib.util.find_spec("rich") is None:  # the live display needs the optional `cli` extra
        if mode == "rich":
            raise JobError("the live display needs rich: pip install 'batchgate[cli]'")
        print("batchgate: no live display (pip install 'batchgate[cli]' for one)", file=sys.stderr)
        from batchgate.jobs.progress.progress_lines import LineSink  # noqa: PLC0415 — only when asked for

        return LineSink(every_s)
    from batchgate.jobs.progress.live_display import RichSink  # noqa: PLC0415 — rich is the optional `cli` extra

    return RichSink()
