"""One id per job everywhere: a batch made with the OpenAI SDK and a native job, both through
`batchgate serve`, are found by their API ids (`batch_…`, `job_…`) in `batchgate report`,
`status`, `jobs` and `cancel` on the server's store; and the dashboard lists both for their key
(and neither for another key)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from batchgate.emulator import EmulatorThread

from .harness import (
    ALPHA,
    PROVIDER_KEY,
    batch_line,
    client,
    create,
    gateway_config,
    running,
    upload,
    wait_ended,
)
from .jobs_client import JobsClient, requests_for


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "batchgate", *args, "--store", str(root / "jobs.db")]
    env = {**os.environ, "EMU_KEY": PROVIDER_KEY}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, env=env)


def _dashboard(url: str, key: str) -> list[dict[str, object]]:
    r = httpx.get(url + "/v1/dashboard/jobs", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    data: list[dict[str, object]] = r.json()["data"]
    return data


@pytest.mark.slow
@pytest.mark.integration
def test_a_served_batch_and_job_are_found_by_their_api_ids(tmp_path: Path, fresh_emu: EmulatorThread) -> None:
    emu = fresh_emu
    with running(tmp_path, gateway_config(tmp_path / "gateway.yaml", emu)) as server:
        key, other = server.keys_create(), server.keys_create()
        sdk = client(server, key)
        batch = create(sdk, upload(sdk, [batch_line(i, ALPHA) for i in range(3)]))
        jobs = JobsClient(server, key)
        try:
            job_id = jobs.create(requests=requests_for(ALPHA, 2), name="native")["id"]
            assert jobs.wait_state(job_id)["state"] == "completed"
        finally:
            jobs.close()
        assert wait_ended(sdk, batch.id).status == "completed"
        listed = {row["id"]: row for row in _dashboard(server.url, key)}
        page = httpx.get(
            f"{server.url}/v1/dashboard/jobs/{batch.id}", headers={"Authorization": f"Bearer {key}"}
        )
        assert page.status_code == 200, page.text  # a batch's page opens from the list too
        assert not {batch.id, job_id} & {row["id"] for row in _dashboard(server.url, other)}
    assert (listed[batch.id]["kind"], listed[job_id]["kind"]) == ("openai", "job")
    assert listed[batch.id]["cancel_path"] == f"/v1/batches/{batch.id}/cancel"
    assert listed[batch.id]["request_counts"] == {"total": 3, "succeeded": 3, "failed": 0, "pending": 0}
    for api_id, n in ((batch.id, 3), (job_id, 2)):
        report = _cli(tmp_path, "report", api_id)
        assert report.returncode == 0, report.stderr
        assert (orjson.loads(report.stdout)["success_count"]) == n
        status = _cli(tmp_path, "status", api_id, "--json")
        assert status.returncode == 0, status.stderr
        assert orjson.loads(status.stdout)["api_id"] == api_id
        refused = _cli(tmp_path, "cancel", api_id)  # found, and sent to the server's API
        assert refused.returncode != 0
        assert api_id in refused.stderr
        assert "Traceback" not in refused.stderr
    listing = _cli(tmp_path, "jobs")
    assert f"({batch.id})" in listing.stdout
    assert f"({job_id})" in listing.stdout
