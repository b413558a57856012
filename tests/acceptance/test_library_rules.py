"""The library is held to the CLI's rules: `Gateway` refuses a body `batchgate run` refuses (same
message, nothing sent); `Job` on invalid input raises an error carrying the first reasons that
speaks Python; `results()` after `run()` yields the job's results."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

import batchgate
from batchgate.emulator import EmulatorThread
from batchgate.errors import InvalidRequestError

from .harness import MODEL, expected_ids, gateway_config, input_line, provider_totals, write_input

pytestmark = pytest.mark.acceptance

CLI_REASON = "max_tokens must be an integer, got a string ('5')"  # what `run` says of such a line


async def test_gateway_refuses_what_run_refuses_before_sending(tmp_path: Path, emu: EmulatorThread) -> None:
    cfg = batchgate.load_config(gateway_config(tmp_path / "gw.yaml", emu, hedge=False))
    messages = [{"role": "user", "content": "hello"}]
    async with batchgate.Gateway(cfg) as gw:
        bad, empty, good = await gw.abatch(
            [
                {"model": MODEL, "max_tokens": "5", "messages": messages},
                {"model": MODEL, "max_tokens": 5, "messages": []},
                {"model": MODEL, "max_tokens": 5, "messages": messages},
            ]
        )
    assert isinstance(bad.error, InvalidRequestError)
    assert bad.error.message == CLI_REASON
    assert bad.error.kind == "invalid_request"
    assert not bad.attempts
    assert isinstance(empty.error, InvalidRequestError)
    assert empty.error.message == "messages must be a non-empty list"
    assert good.ok
    assert provider_totals(emu)["admitted"] == 1  # only the good one was sent


def test_job_on_invalid_input_carries_the_reasons_and_speaks_python(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    cfg = gateway_config(tmp_path / "gw.yaml", emu, hedge=False)
    lines = [orjson.dumps(input_line(i)) for i in range(5)]
    lines[1] = b"not json"
    lines[3] = orjson.dumps({**input_line(2), "custom_id": "bad-type", "max_tokens": "5"})
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    job = batchgate.Job(src, config=cfg, output=tmp_path / "out.jsonl", store=tmp_path / "jobs.db")
    with pytest.raises(batchgate.InputError) as caught:
        job.run()
    message = caught.value.message
    assert "skip_invalid=True" in message
    assert "--skip-invalid" not in message
    assert "line 2: invalid JSON" in message
    assert f"line 4: {CLI_REASON}" in message
    assert [n for n, _ in caught.value.problems] == [2, 4]
    assert provider_totals(emu)["admitted"] == 0

    skipping = batchgate.Job(
        src, config=cfg, output=tmp_path / "out.jsonl", store=tmp_path / "jobs.db", skip_invalid=True
    )
    assert skipping.run()["skipped_invalid_lines"] == 2
    assert not any("--skip-invalid" in m for m in skipping.messages)


async def test_results_after_run_yields_the_jobs_results(tmp_path: Path, emu: EmulatorThread) -> None:
    n = 12
    src = write_input(tmp_path / "in.jsonl", n)
    cfg = gateway_config(tmp_path / "gw.yaml", emu, hedge=False)
    job = batchgate.Job(src, config=cfg, output=tmp_path / "out.jsonl", store=tmp_path / "jobs.db")
    assert (await job.arun())["success_count"] == n
    results = [r async for r in job.results()]
    assert {r.custom_id for r in results} == expected_ids(n)
    assert len(results) == n
    assert all(r.ok and r.answer for r in results)
    assert provider_totals(emu)["admitted"] == n  # nothing was sent again
