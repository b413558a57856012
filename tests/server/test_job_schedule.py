"""Scheduled starts and restarts, with an emulator and a server of their own (the emulator's first
request time is the evidence): a job with `not_before` a few seconds ahead sends nothing before
then and completes; a paused job stays paused and a scheduled one stays scheduled across a
restart of the server, and each goes on as asked afterwards."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread

from .harness import ALPHA, LAG, emulator, gateway_config, running, start_server
from .jobs_client import JobsClient, requests_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # a timed start; a restart
AHEAD_S = 4.0


@pytest.fixture
def own_emu() -> Iterator[EmulatorThread]:
    thread = emulator()
    try:
        yield thread
    finally:
        thread.stop()


def test_a_scheduled_job_sends_nothing_before_its_time(tmp_path: Path, own_emu: EmulatorThread) -> None:
    with running(tmp_path, gateway_config(tmp_path / "gateway.yaml", own_emu)) as server:
        c = JobsClient(server, server.keys_create())
        try:
            not_before = time.time() + AHEAD_S
            made = c.create(requests=requests_for(ALPHA, 4), not_before=not_before)
            assert made["state"] == "scheduled"
            assert c.get(made["id"])["state"] in ("scheduled", "queued", "running", "completed")
            assert own_emu.stats()["first_request_at"] is None or time.time() >= not_before
            done = c.wait_state(made["id"])
        finally:
            c.close()
    assert (done["state"], done["progress"]["succeeded"]) == ("completed", 4)
    first = own_emu.stats()["first_request_at"]
    assert first is not None
    assert first >= not_before
    assert done["times"]["in_progress_at"] >= int(not_before)


def test_paused_and_scheduled_jobs_keep_their_state_across_a_restart(
    tmp_path: Path, own_emu: EmulatorThread
) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", own_emu)
    first = start_server(tmp_path, config)
    try:
        key = first.keys_create()
        c = JobsClient(first, key)
        paused = c.create(requests=requests_for(LAG, 20, "p"), name="held")
        assert c.act(paused["id"], "pause").json()["state"] == "paused"
        later = c.create(requests=requests_for(ALPHA, 2, "l"), not_before=time.time() + 3600)
        c.close()
    finally:
        assert first.stop() == 0
    with running(tmp_path, config) as second:
        c = JobsClient(second, key)
        try:
            assert c.get(paused["id"])["state"] == "paused"
            assert c.get(later["id"])["state"] == "scheduled"
            assert c.act(paused["id"], "resume").status_code == 200
            done = c.wait_state(paused["id"])
            assert (done["state"], done["progress"]["succeeded"]) == ("completed", 20)
            assert c.act(later["id"], "cancel").status_code == 200
            cancelled = c.wait_state(later["id"])
            assert cancelled["state"] == "cancelled"
            assert cancelled["progress"]["succeeded"] == 0
            assert c.results(later["id"]) == []
        finally:
            c.close()
    assert int(own_emu.stats()["providers"]["alpha"]["completed"]) == 0  # the scheduled job sent nothing
