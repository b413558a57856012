"""Writing a fan-out or pipeline job's OUT (one joined line per input item, input order) and errors
file (each failed step's error line), atomically like every OUT, and the report section that
compares its steps: per step (route) success, latency percentiles, tokens, cost, and for a fan-out
the agreement matrix (for each pair of routes, the share of items where both gave the same label).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO, NotRequired, TypedDict

import orjson

from batchgate.errors import JobError
from batchgate.jobs.graph.expand import GraphTasks
from batchgate.jobs.graph.join import Joiner, StepFigures
from batchgate.jobs.graph.spec import FANOUT
from batchgate.jobs.input.skipped import SKIPPED_BLOB
from batchgate.jobs.output.files import _commit, _open_temp
from batchgate.jobs.store.protocol import JobStore, TaskRecord
from batchgate.stats import percentile


async def write_joined(
    store: JobStore, job_id: str, tasks: GraphTasks, out_path: Path, errors_path: Path
) -> tuple[int, int, GraphSection]:
    """Write OUT and the errors file; returns (lines written, failed steps, the report section)."""
    temps: list[tuple[Path, str, IO[bytes]]] = []
    joiner = Joiner(tasks)
    written = 0
    try:
        for target in (out_path, errors_path):
            temps.append((target, *_open_temp(target)))
        out, errs = temps[0][2], temps[1][2]
        try:
            group: list[TaskRecord] = []
            async for rec in store.iter_results(job_id, ordered=True):
                if group and rec.seq // tasks.width != group[0].seq // tasks.width:
                    written += _emit(joiner, group, tasks.width, out)
                    group = []
                group.append(rec)
            if group:
                written += _emit(joiner, group, tasks.width, out)
            errs.write(await store.get_blob(job_id, SKIPPED_BLOB) or b"")  # --skip-invalid's lines
            for line in joiner.failed_lines:
                errs.write(line + b"\n")
        except OSError as exc:
            raise JobError(f"{out_path}: cannot write the output files ({exc.strerror})") from None
        _commit(temps)
    finally:
        for _, temp, f in temps:
            with contextlib.suppress(OSError):
                f.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
    return written, len(joiner.failed_lines), summary(joiner)


def _emit(joiner: Joiner, group: list[TaskRecord], width: int, out: IO[bytes]) -> int:
    line = joiner.join(group[0].seq // width, group)
    if line is None:
        return 0
    out.write(orjson.dumps(line) + b"\n")
    return 1


class StepLatency(TypedDict):
    p50: float
    p95: float
    p99: float


class StepSummary(TypedDict):
    route: str
    sent: int
    succeeded: int
    failed: int
    skipped: int
    blocked: int
    success_rate: float | None
    latency_ms: StepLatency
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class GraphSection(TypedDict):
    """The report's `graph` section: each step's figures, and a fan-out's agreement matrix."""

    kind: str
    steps: dict[str, StepSummary]
    agreement: NotRequired[dict[str, dict[str, float | None]]]


def _step_summary(fig: StepFigures) -> StepSummary:
    lat = sorted(fig.latencies)
    return {
        "route": fig.route,
        "sent": fig.sent,
        "succeeded": fig.succeeded,
        "failed": fig.failed,
        "skipped": fig.skipped,
        "blocked": fig.blocked,
        "success_rate": round(fig.succeeded / fig.sent, 4) if fig.sent else None,
        "latency_ms": {
            "p50": round(percentile(lat, 50), 1),
            "p95": round(percentile(lat, 95), 1),
            "p99": round(percentile(lat, 99), 1),
        },
        "prompt_tokens": fig.prompt_tokens,
        "completion_tokens": fig.completion_tokens,
        "cost_usd": round(fig.cost_usd, 6),
    }


def summary(joiner: Joiner) -> GraphSection:
    """The report section: `{"kind", "steps": {...}, "agreement": {a: {b: share}}}`."""
    out: GraphSection = {
        "kind": joiner.graph.kind,
        "steps": {name: _step_summary(fig) for name, fig in joiner.figures.items()},
    }
    if joiner.graph.kind == FANOUT:
        names = [s.name for s in joiner.graph.steps]
        matrix: dict[str, dict[str, float | None]] = {a: dict.fromkeys(names) for a in names}
        for a in names:
            matrix[a][a] = 1.0
        for (a, b), (compared, agreed) in joiner.pairs.items():
            share = round(agreed / compared, 4) if compared else None
            matrix[a][b] = matrix[b][a] = share
        out["agreement"] = matrix
    return out


def render_graph_summary(section: GraphSection) -> str:
    """The readable table printed under the run summary."""
    title = "routes compared" if section["kind"] == FANOUT else "pipeline steps"
    lines = [
        f"  {title}:",
        f"  {'step':<18}{'route':<20}{'sent':>6}{'ok':>6}{'fail':>6}{'skip':>6}"
        f"{'p50 ms':>9}{'p95 ms':>9}{'tokens':>9}{'cost $':>10}",
    ]
    for name, s in section["steps"].items():
        lat = s["latency_ms"]
        tokens = s["prompt_tokens"] + s["completion_tokens"]
        lines.append(
            f"  {name[:17]:<18}{s['route'][:19]:<20}{s['sent']:>6}{s['succeeded']:>6}{s['failed']:>6}"
            f"{s['skipped']:>6}{lat['p50']:>9.0f}{lat['p95']:>9.0f}{tokens:>9}{s['cost_usd']:>10.4f}"
        )
    matrix = section.get("agreement")
    if matrix:
        names = list(matrix)
        lines.append("  agreement: " + "  ".join(
            f"{a}~{b} {matrix[a][b]:.0%}" for i, a in enumerate(names) for b in names[i + 1 :]
            if matrix[a][b] is not None
        ))  # fmt: skip
    return "\n".join(lines)
