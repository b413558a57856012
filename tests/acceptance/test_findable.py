"""Every skipped or finished line is findable: `--skip-invalid` puts each skipped line, with its
line number and reason, in the errors file and the report names them; OUT is appended as results
are committed (a kill -9 leaves whole lines, a resume continues the same file), `--ordered` is
written at the end by atomic rename."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import batchgate
from batchgate.emulator import EmulatorThread

from .harness import (
    Cli,
    expected_ids,
    gateway_config,
    ids_once,
    input_line,
    kill_hard,
    leftovers,
    provider_totals,
    read_jsonl,
    wait_for,
    write_input,
)

pytestmark = pytest.mark.acceptance


def _bad_input(path: Path) -> Path:
    lines = [orjson.dumps(input_line(i)) for i in range(7)]
    lines[1] = b'{"custom_id": "broken", "model": '  # line 2: not JSON
    lines[3] = orjson.dumps({**input_line(3)["body"], "custom_id": "item-00003", "max_tokens": "5"})  # line 4
    lines[5] = b"[1, 2]"  # line 6: not an object
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.slow
def test_skip_invalid_puts_each_skipped_line_in_the_errors_file(cli: Cli, emu: EmulatorThread) -> None:
    src = _bad_input(cli.cwd / "in.jsonl")
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--skip-invalid")
    assert done.returncode == 0, done.stderr
    assert ids_once(read_jsonl(out)) == {"item-00000", "item-00002", "item-00004", "item-00006"}
    errors = read_jsonl(cli.cwd / "out.jsonl.errors.jsonl")
    assert [e["error"]["line"] for e in errors] == [2, 4, 6]
    assert all(e["error"]["code"] == "invalid_input" for e in errors)
    assert errors[0]["input"] == '{"custom_id": "broken", "model": '
    assert errors[0]["error"]["message"].startswith("invalid JSON")
    assert errors[1]["custom_id"] == "item-00003"  # an object keeps its fields: fix it, feed it back
    assert errors[1]["error"]["message"] == "max_tokens must be an integer, got a string ('5')"
    assert errors[2]["input"] == "[1, 2]"
    assert "skipped 3 invalid input lines (lines 2, 4, 6)" in done.stderr
    assert "out.jsonl.errors.jsonl" in done.stderr

    report = cli.report(cli.status()["job"])
    assert report["skipped_invalid_lines"] == 3
    assert [s["line"] for s in report["skipped_lines"]] == [2, 4, 6]
    assert report["errors_file"] == str(cli.cwd / "out.jsonl.errors.jsonl")

    # fixed in the errors file, the line runs as it is
    fixed = cli.cwd / "fixed.jsonl"
    fixed.write_bytes(orjson.dumps({**errors[1], "max_tokens": 5}) + b"\n")
    again = cli.run("run", str(fixed), "--config", str(cfg), "--output", str(cli.cwd / "fixed.out.jsonl"))
    assert again.returncode == 0, again.stderr
    assert ids_once(read_jsonl(cli.cwd / "fixed.out.jsonl")) == {"item-00003"}


def _whole_rows(path: Path) -> list[dict[str, Any]]:
    """OUT's lines, asserted whole: every line is a JSON object and the file ends with a newline."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "OUT ends in the middle of a line"
    return [orjson.loads(line) for line in data.splitlines()]


@pytest.mark.slow
def test_out_is_appended_as_results_commit_and_a_resume_continues_it(cli: Cli, emu: EmulatorThread) -> None:
    n = 400
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=16)
    out = cli.cwd / "out.jsonl"
    proc = cli.start("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet")
    # a long run can be tailed: OUT grows while the run goes on
    wait_for(lambda: out.exists() and out.stat().st_size > 0, "OUT's first lines during the run")
    inode = out.stat().st_ino
    wait_for(lambda: provider_totals(emu)["completed"] >= 120, "120 answers before the kill")
    kill_hard(proc)
    rows = _whole_rows(out)  # kill -9: the lines done so far, whole
    assert 0 < len(rows) < n
    assert ids_once(rows) <= expected_ids(n)
    stored = cli.status()["succeeded"]
    assert len(rows) <= stored  # the file is never ahead of the store

    done = cli.run("resume", cli.status()["job"], "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    assert ids_once(_whole_rows(out)) == expected_ids(n)  # every custom_id exactly once
    if len(rows) == stored:  # nothing lost between a commit and its append: continued in place
        assert out.stat().st_ino == inode
        assert _whole_rows(out)[: len(rows)] == rows
    assert not list(leftovers(cli.cwd))


@pytest.mark.slow
def test_ordered_output_is_written_at_the_end_by_atomic_rename(cli: Cli, emu: EmulatorThread) -> None:
    n = 60
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=16)
    out = cli.cwd / "out.jsonl"
    out.write_bytes(b'{"an earlier": "good file"}\n')
    inode = out.stat().st_ino
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--ordered", "-q")
    assert done.returncode == 0, done.stderr
    assert [r["custom_id"] for r in _whole_rows(out)] == sorted(expected_ids(n))
    assert out.stat().st_ino != inode  # a new file moved over the old one, never rewritten in place
    assert not list(leftovers(cli.cwd))


def test_every_skipped_line_is_kept_beyond_the_first_thousand(tmp_path: Path, emu: EmulatorThread) -> None:
    bad = 1_005  # more than the validation pass keeps (MAX_REPORTED_PROBLEMS)
    rows = [b"not json %d" % i for i in range(bad)] + [orjson.dumps(input_line(i)) for i in range(2)]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(rows) + b"\n")
    cfg = gateway_config(tmp_path / "gw.yaml", emu)
    job = batchgate.Job(
        src, config=cfg, output=tmp_path / "out.jsonl", store=tmp_path / "jobs.db", skip_invalid=True
    )
    report = job.run()
    assert report["skipped_invalid_lines"] == bad
    assert len(report["skipped_lines"]) == 20  # the report names the first; the errors file has all
    errors = read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert [e["error"]["line"] for e in errors] == list(range(1, bad + 1))
    assert errors[-1]["input"] == f"not json {bad - 1}"
