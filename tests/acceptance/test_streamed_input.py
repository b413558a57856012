"""A plain job's input stored behind the sending: a bad line read after the first requests left
stops the run (what was sent is kept and written, every bad line told, exit 2), the fixed input
continues the job without sending anything twice, and an edit to the part already stored is a
changed input."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from batchgate.emulator import EmulatorThread
from batchgate.jobs.ingest import FIRST_CHUNK

from .harness import (
    Cli,
    expected_ids,
    gateway_config,
    ids_once,
    input_line,
    one_error_line,
    provider_totals,
    read_jsonl,
)

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]  # several CLI runs

N = 400
BAD = 300  # a line number past the first chunk: read after the first requests left


def _write(path: Path, bad: set[int]) -> None:
    lines = [orjson.dumps(input_line(i)) for i in range(N)]
    for line_no in bad:
        lines[line_no - 1] = b'{"custom_id": "broken", "model": '
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_a_bad_line_read_late_stops_the_run_and_the_fixed_input_continues_it(
    cli: Cli, emu: EmulatorThread
) -> None:
    assert BAD > FIRST_CHUNK
    src, out = cli.cwd / "in.jsonl", cli.cwd / "out.jsonl"
    _write(src, {BAD, BAD + 50})
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=64, hedge=False)
    args = ["run", str(src), "--config", str(cfg), "--output", str(out), "-q"]
    done = cli.run(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"in.jsonl:{BAD + 50}: invalid JSON" in done.stderr  # every bad line is told
    assert f"stopped: invalid input on line {BAD}. 0 tasks left" in done.stderr  # the stored ones were sent
    line = done.stderr.splitlines()[-1]
    assert line.startswith("batchgate: error: ")
    assert f"2 invalid lines in all; the first {FIRST_CHUNK} tasks, read before it, were sent" in line
    assert f"(the first on line {BAD})" in line
    sent = ids_once(read_jsonl(out))
    assert sent == {
        f"item-{i:05d}" for i in range(FIRST_CHUNK)
    }  # the chunk holding the bad line was not stored
    assert provider_totals(emu)["completed"] == FIRST_CHUNK
    assert cli.status()["state"] == "stopped"

    _write(src, set())  # fixed
    done = cli.run(*args)
    assert done.returncode == 0, done.stderr
    assert ids_once(read_jsonl(out)) == expected_ids(N)
    assert provider_totals(emu)["completed"] == N  # nothing sent twice
    assert cli.status()["state"] == "completed"
    again = cli.run(*args)  # the whole input stored: its stat is the recorded one, nothing to do
    assert again.returncode == 0, again.stderr
    assert provider_totals(emu)["completed"] == N


def test_an_edit_to_the_stored_part_is_a_changed_input(cli: Cli, emu: EmulatorThread) -> None:
    src, out = cli.cwd / "in.jsonl", cli.cwd / "out.jsonl"
    _write(src, {BAD})
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=64, hedge=False)
    args = ["run", str(src), "--config", str(cfg), "--output", str(out), "-q"]
    assert cli.run(*args).returncode == 2
    lines = src.read_bytes().splitlines()
    lines[0] = orjson.dumps({**input_line(0), "custom_id": "renamed"})
    src.write_bytes(b"\n".join(lines) + b"\n")
    done = cli.run(*args)
    assert done.returncode == 2
    assert "changed since job" in one_error_line(done.stderr)
    assert provider_totals(emu)["completed"] == FIRST_CHUNK  # nothing more was sent
