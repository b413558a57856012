"""The report's JSON bytes and summary, pinned on real jobs: the inputs a report is built from
(the job's record, task counts and totals, run segments, invalid outputs) as two real runs against
the embedded emulator stored them — a live run with a skipped line, a Batch API run — and the two
runs' segments merged as one job's with invalid outputs listed; the expected files were written by
the report code before its documents were typed (issue 44), so the typed report must serialize to
exactly the same bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from batchgate.jobs.finish import write_report
from batchgate.jobs.report.build import build_report
from batchgate.jobs.report.summary import render_summary
from batchgate.jobs.store.options import JobOptions
from batchgate.jobs.store.protocol import JobRecord, TaskState

DATA = Path(__file__).parent / "data"


def _inputs(case: str) -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads((DATA / case / "inputs.json").read_bytes())
    return loaded


def _report_of(inputs: dict[str, Any]) -> Any:
    rec = dict(inputs["job"])
    record = JobRecord(**(rec | {"options": JobOptions.of_dict(rec["options"])}))
    counts = {TaskState(k): int(v) for k, v in inputs["counts"].items()}
    count, items = inputs["invalid"]
    return build_report(record, counts, inputs["totals"], inputs["segments"], invalid=(count, items))


@pytest.mark.parametrize("case", ["report_live", "report_batch", "report_merged"])
def test_report_bytes_and_summary_as_before(case: str, tmp_path: Path) -> None:
    report = _report_of(_inputs(case))
    write_report(tmp_path / "report.json", report)
    assert (tmp_path / "report.json").read_bytes() == (DATA / case / "report.json").read_bytes()
    assert render_summary(report) + "\n" == (DATA / case / "summary.txt").read_text()
