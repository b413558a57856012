"""`batchgate run` against Gemini's wire (the emulator playing AI Studio): a `kind: gemini` job in
batch mode completes through `batchGenerateContent`, and an `auto` job with a near deadline runs
mixed — its batch expires part-done and the rest goes live before the deadline. Every output line
is in OpenAI's Batch output shape; the key is never in the output, the report or the terminal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

from .harness import MODEL, Cli, expected_ids, ids_once, read_jsonl, write_input

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]  # CLI runs as subprocesses

KEY = "gemini-secret-key-7d2a61"
GEMINI = "gemini-2.5-flash"  # priced from the built-in table: auto sees the batch saving


def _emulator(**batch: Any) -> Iterator[EmulatorThread]:
    provider = {
        "name": "gem",
        "family": "gemini",
        "api_key": KEY,
        "models": [GEMINI],
        "limits": {"rpm": 10**6, "tpm": 10**8},
        "latency": {"ttft_p50_ms": 20, "ttft_sigma": 0.2, "per_token_ms": 0},
        "batch": batch,
    }
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": [provider]}))
    emu.start()
    yield emu
    emu.stop()


@pytest.fixture
def quick() -> Iterator[EmulatorThread]:
    yield from _emulator(processing_seconds=1.0)


@pytest.fixture
def expiring() -> Iterator[EmulatorThread]:
    """Batches that would take 40 s but expire after 8 s: about a fifth done by then."""
    yield from _emulator(processing_seconds=40.0, expire_after_seconds=8.0)


def _config(path: Path, emu: EmulatorThread, **job: Any) -> Path:
    data = {
        "providers": [
            {
                "name": "gem",
                "kind": "gemini",
                "base_url": emu.base_url("gem"),
                "api_key_env": "GEMINI_API_KEY",
            }
        ],
        "routes": [{"model": MODEL, "targets": [f"gem:{GEMINI}"]}],
        "settings": {"concurrency": 16, "retry": {"max_attempts": 3, "base_delay": 0.05, "max_delay": 0.2}},
        "job": {"batch_poll": {"initial": 0.2, "factor": 1.5, "maximum": 1}, **job},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _run(cli: Cli, cfg: Path, n: int, *extra: str) -> list[dict[str, Any]]:
    src = write_input(cli.cwd / "in.jsonl", n)
    out = cli.cwd / "out.jsonl"
    cli.env["GEMINI_API_KEY"] = KEY
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), *extra)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    for row in rows:
        assert row["error"] is None
        body = row["response"]["body"]
        assert body["object"] == "chat.completion"
        assert body["model"] == GEMINI
        assert body["choices"][0]["message"]["content"]
    secrets = [*cli.transcript, out.read_text(), (cli.cwd / "out.jsonl.report.json").read_text()]
    assert not any(KEY in text for text in secrets)
    assert KEY.encode() not in cli.store.read_bytes()
    return rows


def test_a_gemini_batch_mode_job_completes(cli: Cli, quick: EmulatorThread) -> None:
    _run(cli, _config(cli.cwd / "gw.yaml", quick), 12, "--mode", "batch-api")
    stats = quick.stats()["providers"]["gem"]
    assert (stats["batches"]["created"], stats["batches"]["requests_succeeded"]) == (1, 12)
    assert stats["admitted"] == 0  # nothing went live
    report = (cli.cwd / "out.jsonl.report.json").read_text()
    assert "gem" in report


def test_an_auto_job_with_a_near_deadline_runs_part_batch_part_live(
    cli: Cli, expiring: EmulatorThread
) -> None:
    """A 14.4 s deadline and a batch assumed to take 7.2 s: `auto` batches at the start; when the
    batch expires (8 s) the deadline is too near for another, so its leftovers go live."""
    cfg = _config(cli.cwd / "gw.yaml", expiring, batch_turnaround_hours=0.002)
    _run(cli, cfg, 20, "--mode", "auto", "--deadline", "0.004")
    stats = expiring.stats()["providers"]["gem"]
    batched = stats["batches"]["requests_succeeded"]
    assert stats["batches"]["created"] == 1
    assert stats["batches"]["expired"] == 1
    assert 0 < batched < 20
    assert stats["completed"] == 20 - batched  # the rest went live


def test_a_route_across_kinds_fails_over_from_gemini_to_openai(cli: Cli, tmp_path: Path) -> None:
    """One OpenAI-shaped file, a route of a Gemini and an OpenAI target: with Gemini answering
    only 500s, every line is answered by the other kind, in OpenAI's Batch output shape."""
    latency = {"ttft_p50_ms": 5, "ttft_sigma": 0.1, "per_token_ms": 0}
    limits = {"rpm": 10**6, "tpm": 10**8}
    providers = [
        {
            "name": "gem",
            "family": "gemini",
            "limits": limits,
            "latency": latency,
            "faults": {"server_error": 1.0},
        },
        {"name": "oa", "family": "openai", "limits": limits, "latency": latency},
    ]
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": providers}))
    emu.start()
    try:
        data = {
            "providers": [
                {"name": "gem", "kind": "gemini", "base_url": emu.base_url("gem")},
                {"name": "oa", "kind": "openai", "base_url": emu.base_url("oa")},
            ],
            "routes": [{"model": MODEL, "targets": [f"gem:{GEMINI}", "oa:gpt-4o-mini"]}],
            "settings": {"retry": {"max_attempts": 4, "base_delay": 0.01, "max_delay": 0.05}},
        }
        cfg = tmp_path / "gw.yaml"
        cfg.write_text(yaml.safe_dump(data), encoding="utf-8")
        src = write_input(cli.cwd / "in.jsonl", 30)
        out = cli.cwd / "out.jsonl"
        done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out))
        assert done.returncode == 0, done.stderr
        rows = read_jsonl(out)
        assert ids_once(rows) == expected_ids(30)
        assert all(row["error"] is None and row["response"]["status_code"] == 200 for row in rows)
        stats = emu.stats()["providers"]
        assert stats["oa"]["completed"] == 30
        assert stats["gem"]["completed"] == 0
        assert stats["gem"]["faults"]["server_error"] > 0  # Gemini was tried, and failed over from
    finally:
        emu.stop()
