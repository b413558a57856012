"""kill -9 of `batchgate serve` with three jobs running (issue #14's claim), small enough for CI:
`bench/serve_kills.py` as a user runs it — the emulator as its own process, the server killed with
SIGKILL three times at seeded random moments and started again — and its claims checked from what
it prints: every item of every job exactly once and succeeded, no item the store held as succeeded
sent again (from the emulator's log of received prompts), each job's callback delivered with one
webhook-id and a valid signature (the receiver answers each event's first attempt with a 500, so
its retry waits in the outbox across kills), one output file for the batch, no error in the
server's log, and the kills done."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]  # a server killed three times
BENCH = Path(__file__).resolve().parents[2] / "bench" / "serve_kills.py"
SRC = Path(__file__).resolve().parents[2] / "src"
KILLS, ITEMS = 3, 200
JOB_LINE = re.compile(
    r"^(batch|high|low) +completed +(\d+) lines: 0 lost, 0 twice, 0 failed; "
    r"callbacks (\d+), (\d+) answered 200 \(1 webhook-id, signatures valid\)$",
    re.MULTILINE,
)


@pytest.mark.timeout(300)  # ~35 s alone; a loaded 2-core machine can take several times that
def test_three_jobs_survive_kill_9s_of_the_server_with_nothing_lost_or_sent_again() -> None:
    argv = [sys.executable, str(BENCH), "--kills", str(KILLS), "--items", str(ITEMS)]
    argv += ["--rpm", "6000", "--latency-ms", "50", "--gap", "0.3,1.2", "--seed", "3"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(SRC), os.environ.get("PYTHONPATH")))),
    }
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=280, check=False)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert f"{KILLS} kills of {KILLS} asked" in out, out
    jobs = JOB_LINE.findall(out)
    assert sorted(name for name, *_ in jobs) == ["batch", "high", "low"], out
    assert all(int(lines) == ITEMS for _, lines, _, _ in jobs), out
    assert all(int(hooks) >= 2 and int(ok) >= 1 for _, _, hooks, ok in jobs), out  # a 500, then again
    assert "succeeded items sent again: 0 " in out, out
    assert "the batch's output files listed: 1" in out, out
    assert "server log: 0 error lines" in out, out
    assert "all claims hold" in out, out
