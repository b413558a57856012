"""Files at rest: every file `batchgate serve` creates in its data folder (server.db, jobs.db, their
-wal/-shm, uploads, outputs, a batch's copies and report, any lock file) is 0600 and every folder
0700 — on a fresh start under a permissive umask, after a batch through the API."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import httpx
import pytest

from batchgate.emulator import EmulatorThread
from batchgate.server.callbacks.delivery import create_secret
from batchgate.server.tenancy.keys import create_key
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry

from .harness import (
    ALPHA,
    batch_line,
    client,
    create,
    gateway_config,
    lines_of,
    start_server,
    upload,
    wait_ended,
)
from .jobs_client import JobsClient, requests_for


def modes(folder: Path) -> dict[str, str]:
    """Every path under `folder` (itself included) -> its permission bits, in octal."""
    found = {".": oct(stat.S_IMODE(folder.stat().st_mode))}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = oct(stat.S_IMODE(path.lstat().st_mode))
    return found


@pytest.mark.slow
def test_a_fresh_server_keeps_its_data_folder_owner_only(tmp_path: Path, emu: EmulatorThread) -> None:
    data = tmp_path / "data"  # does not exist: the server makes it
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    old = os.umask(0o002)  # what a shared machine may have: files 0664, folders 0775
    try:
        server = start_server(tmp_path, config, "--store", str(data / "jobs.db"), "--data", str(data))
    finally:
        os.umask(old)
    try:
        registry = Registry(data / REGISTRY_FILE)
        try:
            key, token = create_key(registry, admin=False, name="t", now=int(time.time()))
            create_secret(registry, key.id)
        finally:
            registry.close()
        c = client(server, token)
        batch = wait_ended(c, create(c, upload(c, [batch_line(i, ALPHA) for i in range(3)])).id)
        assert batch.status == "completed", batch
        assert len(lines_of(c, batch.output_file_id)) == 3
        with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}) as http:
            job = http.post("/jobs", json={"requests": requests_for(ALPHA, 2, "rest")})  # inline input
            assert job.status_code == 201, job.text
            jobs = JobsClient(server, token)
            try:
                assert jobs.wait_state(job.json()["id"])["state"] == "completed"
            finally:
                jobs.close()
        seen = modes(data)
    finally:
        server.stop()
    seen_after = modes(data)  # what the stopped server left
    for found in (seen, seen_after):
        assert {"server.db", "jobs.db", "files"} <= found.keys(), found
        assert any(p.startswith("files/file-") for p in found), found
        wrong = {
            p: m for p, m in found.items()
            if m != ("0o700" if (data / p).is_dir() else "0o600")
        }  # fmt: skip
        assert wrong == {}, wrong
