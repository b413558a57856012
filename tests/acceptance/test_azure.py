"""`batchgate run` against Azure OpenAI's wire (the emulator playing it): a `kind: azure` provider
whose key comes from the environment — through `api_key_env` or a `${VAR}` header — completes every
line live, and the batch mode completes a job on Azure's `/openai/files` + `/openai/batches`.
The key is never in the output, the report, the job store or the terminal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

from .harness import MODEL, Cli, expected_ids, ids_once, read_jsonl, write_input

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]  # CLI runs as subprocesses

KEY = "azure-secret-key-4f1c9e"
VERSION = "2024-10-21"


@pytest.fixture
def azure() -> Iterator[EmulatorThread]:
    """Resource `az` with deployment `dep` (a global batch deployment too), its key checked."""
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.2, "per_token_ms": 0}
    provider = {
        "name": "az",
        "family": "azure",
        "api_key": KEY,
        "models": ["dep"],
        "limits": {"rpm": 10**6, "tpm": 10**8},
        "latency": latency,
        "batch": {"processing_seconds": 1.0},
    }
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": [provider]}))
    emu.start()
    yield emu
    emu.stop()


def _config(path: Path, provider: dict[str, Any]) -> Path:
    data = {
        "providers": [{"name": "az", "kind": "azure", **provider}],
        "routes": [{"model": MODEL, "targets": ["az"]}],
        "settings": {"concurrency": 16, "retry": {"max_attempts": 3, "base_delay": 0.05, "max_delay": 0.2}},
        "job": {"batch_poll": {"initial": 0.2, "factor": 1.5, "maximum": 1}},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _run(cli: Cli, cfg: Path, n: int, *extra: str) -> list[dict[str, Any]]:
    src = write_input(cli.cwd / "in.jsonl", n)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), *extra)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    for row in rows:
        assert row["error"] is None
        assert row["response"]["body"]["model"] == "dep"
    secrets = [*cli.transcript, out.read_text(), (cli.cwd / "out.jsonl.report.json").read_text()]
    assert not any(KEY in text for text in secrets)
    assert KEY.encode() not in cli.store.read_bytes()
    return rows


@pytest.mark.parametrize(
    "provider",
    [
        {"deployment": "dep", "api_version": VERSION, "api_key_env": "AZURE_OPENAI_API_KEY"},
        {"path": f"/openai/deployments/dep?api-version={VERSION}", "headers": {"api-key": "${AZURE_KEY}"}},
        {"path": "/openai/v1", "deployment": "dep", "api_key_env": "AZURE_OPENAI_API_KEY"},
    ],
    ids=["resource", "deployment-url", "v1"],
)
def test_a_kind_azure_provider_keyed_from_the_environment_completes_every_line(
    cli: Cli, azure: EmulatorThread, provider: dict[str, Any]
) -> None:
    entry = dict(provider)
    entry["base_url"] = azure.base_url("az") + entry.pop("path", "")
    cli.env.update({"AZURE_OPENAI_API_KEY": KEY, "AZURE_KEY": KEY})
    _run(cli, _config(cli.cwd / "gw.yaml", entry), 100)
    stats = azure.stats()["providers"]["az"]
    assert stats["completed"] == 100
    assert stats["rejected"].get("auth", 0) == 0


def test_the_batch_mode_completes_a_job_on_azures_batch_endpoints(cli: Cli, azure: EmulatorThread) -> None:
    entry = {
        "base_url": azure.base_url("az"),
        "deployment": "dep",
        "api_version": VERSION,
        "api_key_env": "AZURE_OPENAI_API_KEY",
    }
    cli.env["AZURE_OPENAI_API_KEY"] = KEY
    _run(cli, _config(cli.cwd / "gw.yaml", entry), 12, "--mode", "batch-api")
    stats = azure.stats()["providers"]["az"]
    assert (stats["batches"]["created"], stats["batches"]["requests_succeeded"]) == (1, 12)
    assert stats["admitted"] == 0  # nothing went live
