"""`batchgate submit` against `batchgate serve`, both run as a user runs them (subprocesses): a
plain batchgate input file is uploaded, run and followed to its end, its results written; a
wrong key is a one-line error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from batchgate.emulator import embedding_vector
from batchgate.jobs.job_setup import job_id_for

from .harness import ALPHA, DENIED, GAMMA, PROVIDER_KEY, Server

pytestmark = pytest.mark.acceptance


def submit(*args: str, key: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BATCHGATE_API_KEY": key}
    argv = [sys.executable, "-m", "batchgate", "submit", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90, check=False)


def test_submit_follows_a_job_to_its_end_and_writes_its_results(
    server: Server, keys: dict[str, str], tmp_path: Path
) -> None:
    lines = [
        {"custom_id": f"p-{i}", "model": (ALPHA, GAMMA)[i % 2], "max_tokens": 5,
         "messages": [{"role": "user", "content": f"hello {i}"}]}
        for i in range(4)
    ]  # fmt: skip
    lines.append({"custom_id": "p-denied", "model": DENIED, "max_tokens": 5, "prompt": "hi"})
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    out = tmp_path / "out.jsonl"
    done = submit(str(source), "--server", server.url, "--follow", "--output", str(out), key=keys["a"])
    assert done.returncode == 4, done.stderr  # completed, one line failed
    batch_id = done.stdout.strip()
    assert batch_id.startswith("batch_")
    answered = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert sorted(x["custom_id"] for x in answered) == [f"p-{i}" for i in range(4)]
    failed = [orjson.loads(x) for x in (tmp_path / "out.jsonl.errors.jsonl").read_bytes().splitlines()]
    assert [x["custom_id"] for x in failed] == ["p-denied"]
    assert keys["a"] not in done.stdout + done.stderr
    assert PROVIDER_KEY not in done.stdout + done.stderr


def test_submit_with_a_wrong_key_is_a_one_line_error(server: Server, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps({"model": ALPHA, "prompt": "hi"}) + b"\n")
    done = submit(str(source), "--server", server.url, key="bgk-wrong")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "401" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # several CLI and server starts
def test_serve_with_a_bad_config_or_a_taken_port_is_a_one_line_error(server: Server, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("providers: 3\n", encoding="utf-8")
    port = server.url.rsplit(":", 1)[1]
    config = next(server.root.glob("*.yaml"))
    env = {**os.environ, "EMU_KEY": PROVIDER_KEY}
    for args, says in (
        (("--config", str(bad)), "bad.yaml: providers"),
        (("--config", str(config), "--port", port), f"cannot listen on 127.0.0.1:{port}"),
    ):
        argv = [sys.executable, "-m", "batchgate", "serve", *args, "--store", str(tmp_path / "jobs.db")]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("batchgate: error: ")
        assert says in done.stderr
        assert "Traceback" not in done.stderr


def test_submit_with_a_priority_runs_a_native_job_at_that_priority(
    server: Server, keys: dict[str, str], tmp_path: Path
) -> None:
    lines = [{"custom_id": f"h-{i}", "model": ALPHA, "max_tokens": 5, "prompt": f"hi {i}"} for i in range(3)]
    lines.append({"custom_id": "h-denied", "model": DENIED, "max_tokens": 5, "prompt": "hi"})
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    out = tmp_path / "out.jsonl"
    args = (str(source), "--server", server.url, "--priority", "high", "--follow", "--output", str(out))
    done = submit(*args, key=keys["a"])
    assert done.returncode == 4, done.stderr  # completed, one line failed
    job_id = done.stdout.strip()
    auth = {"Authorization": f"Bearer {keys['a']}"}
    job = httpx.get(f"{server.base_url}/jobs/{job_id}", headers=auth).json()
    assert (job["object"], job["priority"], job["state"]) == ("job", "high", "completed")
    answered = [orjson.loads(x)["custom_id"] for x in out.read_bytes().splitlines()]
    assert sorted(answered) == ["h-0", "h-1", "h-2"]
    errors = (tmp_path / "out.jsonl.errors.jsonl").read_bytes()
    failed = [orjson.loads(x)["custom_id"] for x in errors.splitlines()]
    assert failed == ["h-denied"]
    refused = submit(str(source), "--server", server.url, "--priority", "urgent", key=keys["a"])
    assert refused.returncode == 2
    assert "--priority" in refused.stderr


@pytest.mark.slow
def test_batchgate_cancel_refuses_a_server_s_job_and_never_signals_the_server(
    server: Server, keys: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps({"model": ALPHA, "prompt": "hi"}) + b"\n")
    done = submit(str(source), "--server", server.url, "--follow", key=keys["a"])
    assert done.returncode == 0, done.stderr
    folder = server.root / "batches" / done.stdout.strip()
    job = job_id_for(folder / "input.jsonl", folder / "output.jsonl")
    argv = [sys.executable, "-m", "batchgate", "cancel", job, "--store", str(server.root / "jobs.db")]
    cancel = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert cancel.returncode == 2
    assert "batchgate serve" in cancel.stderr
    assert server.proc.poll() is None  # still serving


@pytest.mark.slow  # several CLI and server starts
def test_a_job_submitted_after_a_cli_cancel_on_the_server_s_store_runs_and_completes(
    server: Server, keys: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps({"model": ALPHA, "prompt": "hi"}) + b"\n")
    first = submit(str(source), "--server", server.url, "--follow", key=keys["a"])
    assert first.returncode == 0, first.stderr
    folder = server.root / "batches" / first.stdout.strip()
    job = job_id_for(folder / "input.jsonl", folder / "output.jsonl")
    argv = [sys.executable, "-m", "batchgate", "cancel", job, "--store", str(server.root / "jobs.db")]
    cancel = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert cancel.returncode == 2, cancel.stderr
    out = tmp_path / "out.jsonl"
    after = submit(str(source), "--server", server.url, "--follow", "--output", str(out), key=keys["a"])
    assert after.returncode == 0, after.stderr
    auth = {"Authorization": f"Bearer {keys['a']}"}
    got = httpx.get(f"{server.base_url}/batches/{after.stdout.strip()}", headers=auth)
    assert got.status_code == 200, got.text
    assert got.json()["status"] == "completed"
    assert len(out.read_bytes().splitlines()) == 1


def test_submit_creates_the_batch_on_the_endpoint_its_lines_name(
    server: Server, keys: dict[str, str], tmp_path: Path
) -> None:
    lines = [
        {"custom_id": f"e-{i}", "method": "POST", "url": "/v1/embeddings",
         "body": {"model": ALPHA, "input": f"text {i}", "dimensions": 4}}
        for i in range(3)
    ]  # fmt: skip
    source = tmp_path / "emb.jsonl"
    source.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    out = tmp_path / "out.jsonl"
    done = submit(str(source), "--server", server.url, "--follow", "--output", str(out), key=keys["a"])
    assert done.returncode == 0, done.stderr
    answered = {x["custom_id"]: x for x in map(orjson.loads, out.read_bytes().splitlines())}
    assert sorted(answered) == ["e-0", "e-1", "e-2"]
    vectors = [answered[f"e-{i}"]["response"]["body"]["data"][0]["embedding"] for i in range(3)]
    assert vectors == [embedding_vector(f"text {i}", 4) for i in range(3)]
