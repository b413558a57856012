"""Structured log events (`batchgate.logs`) and where they go (`batchgate.observe.logsetup`): one
JSON object or one text line per event, the context's bound fields on every event, nothing written
when logging is off (not even warnings on stderr), owner-only log files, one-line errors."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import orjson
import pytest

from batchgate.errors import JobError
from batchgate.logs import DEBUG, INFO, WARNING, bind, bound, enabled, event, get_logger
from batchgate.observe.logsetup import logging_to

log = get_logger("test")


def test_json_lines_carry_the_envelope_the_fields_and_the_bound_context(tmp_path: Path) -> None:
    path = tmp_path / "run.log"

    async def task(custom_id: str) -> None:
        bind(task=custom_id)
        event(log, WARNING, "task_failed", error="authentication", attempt=2)

    async def run() -> None:
        bind(job="job-1")
        event(log, INFO, "job_started", total=3, limits={"requests": 60.0})
        await asyncio.gather(task("item-1"), task("item-2"))
        event(log, DEBUG, "retry", delay_s=0.5)  # below the level: not written
        assert bound() == {"job": "job-1"}  # the tasks' bindings stayed in their own contexts

    with logging_to("info", "json", path):
        asyncio.run(run())
    event(log, WARNING, "after", n=1)  # the handler is gone with the block
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [e["event"] for e in lines] == ["job_started", "task_failed", "task_failed"]
    first = lines[0]
    assert first["level"] == "info"
    assert first["logger"] == "batchgate.test"
    assert first["msg"] == "job_started"
    assert first["ts"].endswith("Z")
    assert first["limits"] == {"requests": 60.0}
    assert first["total"] == 3
    assert {(e["job"], e["task"], e["attempt"]) for e in lines[1:]} == {
        ("job-1", "item-1", 2),
        ("job-1", "item-2", 2),
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_text_lines_show_key_value_pairs_quoting_what_needs_it(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    with logging_to("debug", "text", path):
        event(log, DEBUG, "job_stopping", reason="interrupted by SIGTERM", grace_s=10.0, job="job-2")
    (line,) = path.read_text().splitlines()
    assert " DEBUG   batchgate.test job_stopping " in line
    assert line.endswith('reason="interrupted by SIGTERM" grace_s=10.0 job=job-2')


def test_with_logging_off_nothing_is_written_and_nothing_is_built(capsys: pytest.CaptureFixture[str]) -> None:
    class Exploding:
        def __repr__(self) -> str:
            raise AssertionError("formatted although logging is off")

    assert not enabled(log, INFO)
    event(log, WARNING, "circuit_opened", provider="alpha", odd=Exploding())
    event(log, INFO, "job_started", odd=Exploding())
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out == ""


def test_a_log_file_that_cannot_be_written_is_a_one_line_error(tmp_path: Path) -> None:
    with (
        pytest.raises(JobError, match=r"^--log-file .*missing/run.log: cannot write it"),
        logging_to("info", "json", tmp_path / "missing" / "run.log"),
    ):
        pass
