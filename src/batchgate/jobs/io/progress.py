"""Showing a running job: a snapshot of its figures, and three ways to show it — a live rich
display (terminal), JSON-lines events (scripts), or nothing (quiet).

The snapshot is also what `batchgate status` reads from the store while a job runs elsewhere.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

import orjson

from batchgate.errors import JobError
from batchgate.jobs.store.protocol import TaskOutcome, TaskState
from batchgate.stats import GatewayStatistics

MAX_LISTED_INVALID = 1000  # invalid custom_ids kept for the display and the report


@dataclass(slots=True)
class Progress:
    """Live figures of one run (one process), kept by the engine and read by the displays.

    `prompt_tokens`/`completion_tokens` count the answers kept; `validation_tokens` the answers
    rejected by the output check (billed all the same); `cost_usd` is everything billed.
    `latency` holds per-provider latency histograms (see `report.hist_add`) so runs can be merged.
    `cost_by_provider` counts live and batch answers; `batch_cost_by_provider` the batch ones only.
    `batch_view`, set by a run with batch mode, returns its open batches and batch counters.
    """

    started: float
    total: int
    done_before: int = 0  # terminal tasks from earlier runs
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
    batch_view: Callable[[], dict[str, Any]] | None = None

    def batches(self) -> dict[str, Any]:
        """The batch view (empty when the run has no batch mode)."""
        return self.batch_view() if self.batch_view is not None else {}

    @property
    def done(self) -> int:
        return self.done_before + self.succeeded + self.failed

    def record(self, outcome: TaskOutcome) -> None:
        """A task's outcome, live or batch: counted done, and the kept answer's tokens."""
        if outcome.state is TaskState.SUCCEEDED:
            self.succeeded += 1
            self.prompt_tokens += outcome.prompt_tokens
            self.completion_tokens += outcome.completion_tokens
        else:
            self.failed += 1

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


def snapshot(
    job_id: str, progress: Progress, stats: GatewayStatistics | None, elapsed_s: float, wall: float
) -> dict[str, Any]:
    done_now = progress.succeeded + progress.failed
    rate = done_now / elapsed_s if elapsed_s > 0 else 0.0
    pending = max(0, progress.total - progress.done)
    providers: dict[str, Any] = {}
    rate_limited = 0
    sending = 0  # requests at the providers; the engine's other active tasks wait for quota
    if stats is not None:
        for name, p in stats.providers.items():
            rate_limited += p.rate_limited
            sending += p.in_flight
            providers[name] = {
                "requests": p.requests,
                "ok": p.succeeded,
                "errors": p.failed_attempts,
                "rate_limited": p.rate_limited,
                "in_flight": p.in_flight,
                "tokens": p.prompt_tokens + p.completion_tokens,
                "p50_ms": round(p.latency_p50_ms, 1),
                "cost_usd": round(progress.cost_by_provider.get(name, 0.0), 6),
                "batch_cost_usd": round(progress.batch_cost_by_provider.get(name, 0.0), 6),
            }
    snap: dict[str, Any] = {
        "event": "progress",
        "job": job_id,
        "time": round(wall, 3),
        "total": progress.total,
        "done": progress.done,
        "succeeded": progress.succeeded,
        "failed": progress.failed,
        "done_before": progress.done_before,
        "pending": pending,
        "in_flight": sending if stats is not None else progress.in_flight,
        "waiting": max(0, progress.in_flight - sending) if stats is not None else 0,
        "rate_per_s": round(rate, 2),
        "eta_s": round(pending / rate, 1) if rate > 0 else None,
        "rate_limited": rate_limited,
        "tokens": progress.prompt_tokens + progress.completion_tokens + progress.validation_tokens,
        "cost_usd": round(progress.cost_usd, 6),
        "elapsed_s": round(elapsed_s, 2),
        "providers": providers,
    }
    view = progress.batches()
    if view:
        counters: dict[str, Any] = view.get("stats", {})
        snap["batches"] = {
            "open": view.get("open", 0),
            "items": view.get("items", 0),
            "processed": view.get("processed", 0),
            "by_state": view.get("by_state", {}),
            "submitted": counters.get("batches_submitted", 0),
            "resumed": counters.get("batches_resumed", 0),
            "ended": counters.get("batches_ended", {}),
            "list": view.get("batches", []),
        }
    return snap


class ProgressSink(Protocol):
    def event(self, name: str, **fields: Any) -> None: ...

    def update(self, snap: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class QuietSink:
    def event(self, name: str, **fields: Any) -> None:
        return None

    def update(self, snap: dict[str, Any]) -> None:
        return None

    def close(self) -> None:
        return None


class JsonLinesSink:
    """One JSON object per line on stdout: `started`, `progress` (each tick), then `finished` or
    `stopped` (with the exit code, the files written and how to resume). Nothing else goes to stdout."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream or sys.stdout

    def _write(self, obj: dict[str, Any]) -> None:
        self._stream.write(orjson.dumps(obj).decode() + "\n")
        self._stream.flush()

    def event(self, name: str, **fields: Any) -> None:
        self._write({"event": name, **fields})

    def update(self, snap: dict[str, Any]) -> None:
        self._write(snap)

    def close(self) -> None:
        return None


def _fmt_eta(eta: float | None) -> str:
    if eta is None:
        return "--"
    minutes, seconds = divmod(int(eta), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


class RichSink:
    """A live table on stderr: overall progress, rate, ETA, 429s, tokens, cost, and one row per provider."""

    def __init__(self) -> None:
        from rich.console import Console  # noqa: PLC0415 — rich is the optional `cli` extra
        from rich.live import Live  # noqa: PLC0415 — rich is the optional `cli` extra

        self._console = Console(stderr=True)
        self._live = Live(console=self._console, refresh_per_second=4, transient=False)
        self._live.start()

    def event(self, name: str, **fields: Any) -> None:
        if name == "started":
            self._console.print(
                f"[bold]batchgate[/] job {fields.get('job')}: {fields.get('pending')} to run, "
                f"{fields.get('done')} already done"
            )
        elif name == "stopping":
            self._console.print(
                f"[yellow]stopping[/]: {fields.get('reason')}; waiting up to {fields.get('grace_s')} s for "
                f"{fields.get('in_flight')} in-flight requests (press Ctrl-C again to stop at once)"
            )

    def update(self, snap: dict[str, Any]) -> None:
        from rich.console import Group  # noqa: PLC0415 — rich is the optional `cli` extra
        from rich.progress_bar import ProgressBar  # noqa: PLC0415 — rich is the optional `cli` extra
        from rich.table import Table  # noqa: PLC0415 — rich is the optional `cli` extra
        from rich.text import Text  # noqa: PLC0415 — rich is the optional `cli` extra

        total = max(1, snap["total"])
        head = Text.assemble(
            (f"{snap['done']}/{snap['total']} done", "bold"),
            f"  ok {snap['succeeded']}  failed {snap['failed']}  pending {snap['pending']}"
            f"  in flight {snap['in_flight']} (+{snap.get('waiting', 0)} waiting for quota)"
            f"  ·  {snap['rate_per_s']:.1f}/s  ETA {_fmt_eta(snap['eta_s'])}"
            f"  ·  429s {snap['rate_limited']}  ·  {snap['tokens']} tokens  ·  ${snap['cost_usd']:.4f}",
        )
        table = Table(box=None, pad_edge=False, header_style="dim")
        for col in (
            "provider",
            "requests",
            "ok",
            "errors",
            "429s",
            "in flight",
            "tokens",
            "cost $",
            "p50 ms",
        ):
            table.add_column(col, justify="left" if col == "provider" else "right")
        for name, p in sorted(snap["providers"].items()):
            table.add_row(
                name,
                str(p["requests"]),
                str(p["ok"]),
                str(p["errors"]),
                str(p["rate_limited"]),
                str(p["in_flight"]),
                str(p["tokens"]),
                f"{p.get('cost_usd', 0.0):.4f}",
                f"{p['p50_ms']:.0f}",
            )
        bar = Table.grid()  # a grid row of its own, so the table starts on the next line
        bar.add_row(ProgressBar(total=total, completed=snap["done"], width=60))
        self._live.update(Group(head, bar, table))

    def close(self) -> None:
        self._live.stop()


def make_sink(mode: str) -> ProgressSink:
    if mode == "json":
        return JsonLinesSink()
    if mode == "quiet":
        return QuietSink()
    if mode == "auto" and not sys.stderr.isatty():
        return QuietSink()
    try:
        import rich  # noqa: F401, PLC0415 — the live display needs the optional `cli` extra
    except ImportError:
        if mode == "rich":
            raise JobError("the live display needs rich: pip install 'batchgate[cli]'") from None
        print("batchgate: no live display (pip install 'batchgate[cli]' for one)", file=sys.stderr)
        return QuietSink()
    return RichSink()
