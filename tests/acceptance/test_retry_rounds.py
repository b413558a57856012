"""Failed tasks run again in rounds: `resume --retry-failed [N]` re-runs a job's failed tasks at
most N rounds (1 when no N is given), `batchgate retry` has the same cap, and the report counts the
rounds. The provider refuses a field half the lines carry, so those fail again in every round."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

from .harness import Cli, gateway_config, input_line, one_error_line, read_jsonl

pytestmark = pytest.mark.acceptance


@pytest.fixture
def strict() -> Iterator[EmulatorThread]:
    """One OpenAI-family provider that answers a body carrying `user` with a 400."""
    provider = {
        "name": "alpha",
        "family": "openai",
        "limits": {"rpm": 10**6, "tpm": 10**8},
        "latency": {"ttft_p50_ms": 20, "ttft_sigma": 0.1, "per_token_ms": 0},
        "reject_fields": ["user"],
    }
    unused = {"name": "gamma", "family": "anthropic", "limits": {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8}}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": [provider, unused]}))
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


def _setup(cli: Cli, emu: EmulatorThread, n: int) -> tuple[Path, Path]:
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, max_attempts=1)
    data = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    data["providers"] = data["providers"][:1]
    data["routes"][0]["targets"] = ["alpha:gpt-4o-mini"]
    data["prices"].pop("claude-3-5-haiku-latest")
    cfg.write_text(yaml.safe_dump(data), encoding="utf-8")
    lines = [input_line(i) for i in range(n)]
    for i, line in enumerate(lines):
        if i % 2 and "params" not in line:  # (an Anthropic line's `user` is not carried over)
            (line.get("body") or line)["user"] = "u-1"  # refused: fails every round
    src = cli.cwd / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return src, cfg


def _refused(emu: EmulatorThread) -> int:
    return sum(emu.stats()["providers"]["alpha"]["rejected"].values())


@pytest.mark.slow  # eight CLI runs
def test_resume_and_retry_rerun_failed_tasks_at_most_n_rounds(cli: Cli, strict: EmulatorThread) -> None:
    n, bad = 6, 2  # lines 3 and 5
    src, cfg = _setup(cli, strict, n)
    first = cli.run("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "-q")
    assert first.returncode == 4, first.stderr
    job = cli.status()["job"]
    assert _refused(strict) == bad
    assert cli.report(job)["retry_rounds"] == 0

    plain = cli.run("resume", job, "-q")  # without the flag nothing is re-run
    assert plain.returncode == 4, plain.stderr
    assert _refused(strict) == bad

    two = cli.run("resume", job, "--retry-failed", "2", "-q")
    assert two.returncode == 4, two.stderr
    assert _refused(strict) == 3 * bad  # two rounds, each re-sending the two that fail again
    assert "round 2 of 2" in two.stderr
    assert cli.report(job)["retry_rounds"] == 2

    one = cli.run("resume", "--retry-failed", job, "-q")  # no N: one round (a job id is not N)
    assert one.returncode == 4, one.stderr
    assert _refused(strict) == 4 * bad

    again = cli.run("retry", job, "-q")  # `retry`: one round by default
    assert again.returncode == 4, again.stderr
    assert _refused(strict) == 5 * bad
    capped = cli.run("retry", job, "--retry-failed", "3", "--progress", "quiet")  # with the summary
    assert capped.returncode == 4, capped.stderr
    assert _refused(strict) == 8 * bad  # three rounds, not more
    report = cli.report(job)
    assert report["retry_rounds"] == 7
    assert (report["success_count"], report["failed_count"]) == (n - bad, bad)
    assert len(read_jsonl(cli.cwd / "out.jsonl")) == n
    assert "failed items re-run in 7 rounds" in capped.stdout + capped.stderr

    wrong = cli.run("retry", job, "--retry-failed", "0")
    assert wrong.returncode == 2
    assert "--retry-failed takes a number of rounds" in one_error_line(wrong.stderr)
    assert _refused(strict) == 8 * bad
