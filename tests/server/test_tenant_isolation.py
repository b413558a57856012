"""What one tenant's large work costs the others (issue 40): a message batch of many requests is
parsed and checked off the event loop, so another tenant's listing is answered meanwhile; a key
creates at most `--max-batches-per-minute` batches a minute; a key holds at most its share of the
run places, so another key's first batch starts while it has many queued."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest

from batchgate.emulator import EmulatorThread

from .harness import ALPHA, SLOW, Server, gateway_config, running
from .jobs_client import JobsClient, requests_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
LARGE = 50_000


def _message_batch(n: int) -> bytes:
    """`n` requests, the last naming no route: the whole batch is checked, then refused (a 400),
    so nothing of it runs."""
    params = {"model": ALPHA, "max_tokens": 5, "messages": [{"role": "user", "content": "hello there"}]}
    requests = [{"custom_id": f"r{i}", "params": params} for i in range(n - 1)]
    requests.append({"custom_id": "last", "params": {**params, "model": "no-such-route"}})
    return orjson.dumps({"requests": requests})


def test_another_tenant_is_answered_while_a_large_batch_is_checked(server: Server) -> None:
    a, b = server.keys_create(), server.keys_create()
    body = _message_batch(LARGE)
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    ended: dict[str, float] = {}
    answer: list[bytes] = []
    with socket.create_connection((host, int(port)), timeout=120) as s:
        head = f"POST /v1/messages/batches HTTP/1.1\r\nHost: x\r\nx-api-key: {a}\r\n"
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        s.sendall(head.encode() + body)  # returns once the server has read all but a socket buffer

        def read_answer() -> None:
            while chunk := s.recv(65536):
                answer.append(chunk)
            ended["batch"] = time.monotonic()

        reader = threading.Thread(target=read_answer)
        reader.start()
        r = httpx.get(f"{server.base_url}/batches", headers={"Authorization": f"Bearer {b}"}, timeout=120)
        ended["listing"] = time.monotonic()
        reader.join(120)
    assert r.status_code == 200, r.text
    said = b"".join(answer)
    assert said.startswith(b"HTTP/1.1 400 "), said[:200]
    assert b"requests[49999]" in said  # the whole batch was checked, to its last request
    assert ended["listing"] < ended["batch"]  # tenant B's answer came while A's batch was checked


def test_a_key_past_its_creations_a_minute_gets_a_429_and_another_key_does_not(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    with running(tmp_path, config, "--max-batches-per-minute", "2") as server:
        a, b = JobsClient(server, server.keys_create()), JobsClient(server, server.keys_create())
        try:
            for i in range(2):
                a.create(requests=requests_for(ALPHA, 1, f"a{i}"))
            refused = a.http.post("/jobs", json={"requests": requests_for(ALPHA, 1, "a2")})
            assert refused.status_code == 429, refused.text
            assert "--max-batches-per-minute" in refused.json()["error"]["message"]
            assert int(refused.headers["Retry-After"]) >= 1
            assert len(a.find()["data"]) == 2  # the refused one was never made
            b.create(requests=requests_for(ALPHA, 1, "b0"))  # B's own turns
        finally:
            a.close()
            b.close()


def test_another_key_s_first_job_runs_while_one_key_has_long_jobs_queued(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    """`--max-jobs 2`: A's two long jobs (SLOW at 6 a minute: 8 lines take over 10 s) once held
    both places; now A holds one (half of --max-jobs) and B's one-line job runs to its end while
    neither of A's has ended."""
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    with running(tmp_path, config, "--max-jobs", "2") as server:
        a, b = JobsClient(server, server.keys_create()), JobsClient(server, server.keys_create())
        try:
            long = [a.create(requests=requests_for(SLOW, 8, f"long{i}"))["id"] for i in range(2)]
            a.wait_state(long[0], ("running",))
            quick = b.create(requests=requests_for(ALPHA, 1, "quick"))["id"]
            assert b.wait_state(quick)["state"] == "completed"
            states = [a.get(job_id)["state"] for job_id in long]
            for job_id in long:
                a.act(job_id, "cancel")
        finally:
            a.close()
            b.close()
    assert states == ["running", "queued"]  # B's ran to its end ahead of A's second, beside A's first


def test_a_key_s_stored_files_bytes_and_batches_in_flight_are_bounded(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    """Per-key limits (issue 40: 200 MB and 1,500 files from one key were never refused)."""
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    limits = (
        "--max-files-per-key",
        "2",
        "--max-stored-bytes-per-key",
        "1000",
        "--max-in-flight-per-key",
        "1",
    )
    with running(tmp_path, config, *limits) as server:
        a, b, c = (JobsClient(server, server.keys_create()) for _ in range(3))
        try:
            for i in range(2):
                assert a.http.post(
                    "/files", files={"file": (f"f{i}", b"{}\n")}, data={"purpose": "batch"}
                ).is_success
            third = a.http.post("/files", files={"file": ("f2", b"{}\n")}, data={"purpose": "batch"})
            assert third.status_code == 429, third.text
            assert "--max-files-per-key" in third.json()["error"]["message"]
            big = b.http.post("/files", files={"file": ("big", b"x" * 1500)}, data={"purpose": "batch"})
            assert big.status_code == 413, big.text
            assert "--max-stored-bytes-per-key" in big.json()["error"]["message"]
            assert b.http.get("/files").json()["data"] == []  # nothing of it kept
            long = c.create(requests=requests_for(SLOW, 8, "long"))["id"]
            second = c.http.post("/jobs", json={"requests": requests_for(ALPHA, 1, "more")})
            assert second.status_code == 429, second.text
            assert "--max-in-flight-per-key" in second.json()["error"]["message"]
            c.act(long, "cancel")
        finally:
            for x in (a, b, c):
                x.close()
