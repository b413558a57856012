"""A stopped server's batches resume when it starts again (from the job store): after a SIGTERM
(its jobs stop gracefully) and after a kill -9 (nothing graceful at all), the batch completes with
every line exactly once in its output; a batch killed after writing its output file ends with one
output file, not one per attempt."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry
from waiting import wait_for

from .harness import (
    ALPHA,
    LAG,
    batch_line,
    client,
    create,
    gateway_config,
    keys_create,
    lines_of,
    running,
    start_server,
    upload,
    wait_ended,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # servers killed and started again
LINES = 6


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_a_batch_in_progress_resumes_when_the_server_starts_again(
    tmp_path: Path, emu: EmulatorThread, sig: signal.Signals
) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    key = keys_create(tmp_path)
    first = start_server(tmp_path, config)
    try:
        c = client(first, key)
        batch = create(c, upload(c, [batch_line(i, LAG) for i in range(LINES)]))  # 1 s an answer
        wait_for(lambda: c.batches.retrieve(batch.id).status != "validating", "the batch to start")
        first.proc.send_signal(sig)  # the calls are in flight, the lines unanswered
        first.proc.wait(timeout=60)
    finally:
        first.stop()
    with running(tmp_path, config) as second:
        c = client(second, key)
        assert c.batches.retrieve(batch.id).status in ("in_progress", "finalizing", "completed")
        done = wait_ended(c, batch.id)
        out = lines_of(c, done.output_file_id)
    assert done.status == "completed", done
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed) == (LINES, LINES)
    assert sorted(x["custom_id"] for x in out) == sorted(f"req-{i}" for i in range(LINES))


def test_a_batch_killed_while_finalizing_keeps_one_output_file(tmp_path: Path, emu: EmulatorThread) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    key = keys_create(tmp_path)
    with running(tmp_path, config) as first:
        c = client(first, key)
        batch = create(c, upload(c, [batch_line(i, ALPHA) for i in range(LINES)]))
        done = wait_ended(c, batch.id)
    # The state a kill -9 leaves after the output file was committed and before the batch's end
    # was saved: the batch still finalizing, its output file listed.
    registry = Registry(tmp_path / REGISTRY_FILE)
    try:
        record = registry.get_batch(batch.id)
        assert record is not None
        record.status, record.output_file_id = "finalizing", None
        record.times.pop("completed_at")
        registry.save_batch(record)
    finally:
        registry.close()
    with running(tmp_path, config) as second:
        c = client(second, key)
        again = wait_ended(c, batch.id)
        names = [f.filename for f in c.files.list()]
        out = lines_of(c, again.output_file_id)
    assert again.status == "completed", again
    assert names.count(f"{batch.id}_output.jsonl") == 1, names
    assert again.output_file_id == done.output_file_id
    assert sorted(x["custom_id"] for x in out) == sorted(f"req-{i}" for i in range(LINES))
