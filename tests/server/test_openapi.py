"""The served OpenAPI document describes what the server really does: schemathesis (its CLI, as a
user runs it) generates requests for every documented operation from `/openapi.json` and sends
them to the live server over a socket with a valid key; no answer is a 5xx and every answer
matches the documented schema."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .harness import ALPHA, Server

pytestmark = pytest.mark.integration
if os.environ.get("CI") != "true":
    pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")

MAX_EXAMPLES = 10  # per operation: the run stays within seconds


def test_the_document_lists_the_job_files_batches_and_live_routes(server: Server) -> None:
    r = httpx.get(server.url + "/openapi.json")  # no key needed
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    paths = doc["paths"]
    assert {"/v1/jobs", "/v1/jobs/{id}", "/v1/jobs/{id}/pause", "/v1/jobs/{id}/results"} <= set(paths)
    assert {"/v1/files", "/v1/files/{id}/content", "/v1/batches", "/v1/batches/{id}/cancel"} <= set(paths)
    assert {"/v1/chat/completions", "/v1/messages", "/v1/messages/batches/{id}/results"} <= set(paths)
    assert set(paths["/v1/jobs"]) == {"get", "post"}
    example = paths["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["example"]
    assert example["requests"][0]["model"] == ALPHA  # runnable here: schemathesis creates real jobs


@pytest.mark.slow  # hundreds of generated requests
def test_schemathesis_finds_no_server_error_and_no_schema_violation(server: Server, tmp_path: Path) -> None:
    key = server.keys_create()  # a key of its own: what it creates stays out of the other tests' way
    argv = [
        sys.executable, "-m", "schemathesis.cli", "run", server.url + "/openapi.json",
        "--header", f"Authorization: Bearer {key}",
        "--checks", "not_a_server_error,response_schema_conformance",
        "--max-examples", str(MAX_EXAMPLES), "--seed", "14", "--workers", "1",
        "--generation-database", "none", "--no-color", "--request-timeout", "20",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=110, check=False)
    summary = done.stdout[-6000:]
    assert done.returncode == 0, summary + done.stderr[-2000:]
    operations = sum(len(ops) for ops in httpx.get(server.url + "/openapi.json").json()["paths"].values())
    assert f"Tested: {operations}" in summary, summary
    assert "internal error" not in server.log.read_text()
