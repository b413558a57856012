"""Validate before anything exists (issue 30): the whole config, its `emulator:` section included,
is checked before a job is created — a typo there is one error line naming the key, with no job
left in `jobs` (nor a store created) and nothing sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from .harness import MODEL, Cli, one_error_line, write_input

pytestmark = pytest.mark.acceptance


def _embedded_config(path: Path, emulator_provider: dict[str, Any], kind: str = "openai") -> Path:
    data = {
        "providers": [{"name": "alpha", "kind": kind, "base_url": "emulator"}],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.6}},
        "emulator": {"providers": [emulator_provider]},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("provider", "kind", "expected"),
    [
        (
            {"name": "alpha", "family": "openai", "limts": {"rpm": 100}},
            "openai",
            "emulator: providers[0].limts",
        ),
        ({"name": "beta", "family": "openai"}, "openai", "providers[0].base_url: is 'emulator' but"),
        ({"name": "alpha", "family": "openai"}, "anthropic", "providers[0].kind: is 'anthropic' but"),
    ],
)
@pytest.mark.slow
def test_a_bad_emulator_section_leaves_no_job(
    cli: Cli, provider: dict[str, Any], kind: str, expected: str
) -> None:
    src = write_input(cli.cwd / "in.jsonl", 3)
    cfg = _embedded_config(cli.cwd / "gw.yaml", provider, kind)
    for command in (("run", str(src), "--output", "out.jsonl"), ("plan", str(src))):
        done = cli.run(*command, "--config", str(cfg), store=command[0] == "run")
        assert done.returncode == 2, done.stderr
        line = one_error_line(done.stderr)
        assert f"gw.yaml: {expected}" in line, line
    assert not cli.store.exists(), "a job store was created"
    assert not (cli.cwd / "out.jsonl").exists()
    jobs = cli.run("jobs")
    assert "job-" not in jobs.stdout
