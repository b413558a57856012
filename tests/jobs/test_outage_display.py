"""A paused provider (an outage being waited out, `policy/outage.py`) as every display shows it:
the snapshot's lines and the plain progress line say "waiting for alpha since 12:03", the live
display's provider row "waiting since 12:03", and the JSON progress carries `paused_since`."""

from __future__ import annotations

import time

from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.progress.live_display import head_lines, provider_row
from batchgate.jobs.progress.progress_lines import progress_line
from batchgate.jobs.progress.shapes import Snapshot
from batchgate.jobs.progress.snapshot import snapshot
from batchgate.stats import GatewayStatistics, ProviderRecorder

AT_12_03 = time.mktime((2026, 12, 4, 12, 3, 30, 0, 0, -1))  # local time, as the display prints it


def _snap(paused_since: float | None) -> Snapshot:
    alpha = ProviderRecorder("alpha")
    alpha.record_unreachable("connection refused")
    stats = GatewayStatistics(
        providers={"alpha": alpha.snapshot(None, "paused" if paused_since else "closed", paused_since)},
        items_succeeded=0,
        items_failed=0,
    )
    return snapshot("job1", Progress(started=0.0, total=10), stats, 5.0, AT_12_03 + 60)


def test_a_paused_provider_is_shown_waiting_since_when_it_stopped_answering() -> None:
    snap = _snap(AT_12_03)
    assert snap["unreachable"] == ["waiting for alpha since 12:03"]
    assert "waiting for alpha since 12:03" in progress_line(snap)
    assert "waiting for alpha since 12:03" in head_lines(snap)
    entry = snap["providers"]["alpha"]
    assert entry["state"] == "waiting since 12:03"
    assert entry["paused_since"] == round(AT_12_03, 3)
    assert provider_row("alpha", entry)[1] == "waiting since 12:03"


def test_an_unreachable_provider_not_paused_is_shown_as_before() -> None:
    snap = _snap(None)
    assert snap["unreachable"] == ["alpha unreachable: connection refused, 1 attempt"]
    assert snap["providers"]["alpha"]["state"] == "unreachable"
