"""The progress snapshot (`--progress json`, the store's `live` blob, `batchgate status`) and the
lines the displays make of it, pinned byte for byte: two providers (one answering with a retried
failure, one unreachable), an open batch and batch counters, a budget. The expected file was
written by the code before the snapshot was typed (issue 44)."""

from __future__ import annotations

from pathlib import Path

import orjson

from batchgate.jobs.batch.stats import OpenBatches
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.progress.live_display import head_lines
from batchgate.jobs.progress.progress_lines import progress_line
from batchgate.jobs.progress.shapes import BatchView, BudgetView
from batchgate.jobs.progress.snapshot import snapshot
from batchgate.jobs.report.batch_figures import BatchModeStats
from batchgate.stats import GatewayStatistics, ProviderRecorder

DATA = Path(__file__).parent / "data"


def _stats() -> GatewayStatistics:
    alpha = ProviderRecorder("alpha")
    for i in range(5):
        alpha.record_success(100.0 + i, 10, 3)
    alpha.record_failure("server_error", 50.0, 7)
    alpha.record_retry("server_error")
    beta = ProviderRecorder("beta")
    beta.record_unreachable("connection refused")
    providers = {"alpha": alpha.snapshot(None, "closed", None), "beta": beta.snapshot(None, "open", None)}
    return GatewayStatistics(providers=providers, items_succeeded=5, items_failed=1)


def _view(open_: OpenBatches, counters: BatchModeStats) -> BatchView:
    view = open_.summary()
    view["stats"] = counters.to_dict()
    return view


def test_the_snapshot_and_its_lines_are_as_before() -> None:
    progress = Progress(started=0.0, total=40)
    progress.succeeded, progress.failed, progress.in_flight, progress.cost_usd = 5, 1, 3, 0.0123456789
    progress.prompt_tokens, progress.completion_tokens = 50, 15
    open_ = OpenBatches()
    open_.add("k1", "alpha", "batch_1", 20, 1)
    counters = BatchModeStats(batches_submitted=1)
    counters.ended("completed")
    progress.watch_batches(lambda: _view(open_, counters))
    budget: BudgetView = {"spent_usd": 0.0123, "max_usd": 1.0, "spent_tokens": 65, "max_tokens": None}
    snap = snapshot("job1", progress, _stats(), 12.5, 1_796_000_000.0, budget)
    text = orjson.dumps(snap, option=orjson.OPT_INDENT_2).decode() + "\n"
    text += progress_line(snap) + "\n" + "\n".join(head_lines(snap)) + "\n"
    assert text == (DATA / "snapshot.txt").read_text()
