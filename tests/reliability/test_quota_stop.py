"""An exhausted account (OpenAI `insufficient_quota`, Anthropic `billing_error`) is never retried
and stops `batchgate run` with that reason (exit 3), recording no item as failed; after the top-up
(here: a config pointing at a healthy provider) the same command completes the job."""

from __future__ import annotations

import pytest

from acceptance.harness import Cli, read_jsonl

from .helpers import (
    check_store_consistent,
    emu_provider,
    gw_provider,
    start_emulator,
    write_config,
    write_input,
)

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]


@pytest.mark.parametrize("family", ["openai", "anthropic"])
def test_exhausted_account_stops_the_run_with_its_reason(cli: Cli, family: str) -> None:
    n = 40
    broke = start_emulator([emu_provider("p", family, faults={"insufficient_quota": 1.0})])
    healthy = start_emulator([emu_provider("p", family)])
    try:
        src = write_input(cli.cwd / "in.jsonl", n)
        out = cli.cwd / "out.jsonl"
        cfg = cli.cwd / "gw.yaml"
        write_config(cfg, [gw_provider(broke, "p", family)], concurrency=2)
        args = ["run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet"]
        done = cli.run(*args)
        assert done.returncode == 3, done.stderr
        assert "Traceback" not in done.stderr
        status = check_store_consistent(cli, n)
        assert status["state"] == "stopped"
        reason = status["stop_reason"] or ""
        assert "refused" in reason or "quota" in reason or "credit" in reason, reason
        assert reason in done.stderr
        assert status["failed"] == 0  # not the items' fault: they wait for the top-up
        sent = broke.stats()["providers"]["p"]["faults"]["insufficient_quota"]
        assert 1 <= sent <= 2 + 2  # never retried: at most what was in flight when it stopped

        write_config(cfg, [gw_provider(healthy, "p", family)], concurrency=2)
        done = cli.run(*args)
        assert done.returncode == 0, done.stderr
        rows = read_jsonl(out)
        assert sorted(r["custom_id"] for r in rows) == [f"item-{i:05d}" for i in range(n)]
        assert all(r["error"] is None for r in rows)
    finally:
        broke.stop()
        healthy.stop()
