"""`batchgate run` against AWS Bedrock's wire (the emulator playing it, each signature checked):
a `kind: bedrock` provider signing with the credentials of the environment completes every line
of an OpenAI-shaped file through Converse or ConverseStream, under a per-model quota; a line
holding a field Converse cannot carry fails by name, never sent; the secret key appears nowhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from awsutil import aws_env
from batchgate.emulator import EmulatorThread, emulator_config_from_dict

from .harness import MODEL, Cli, expected_ids, ids_once, read_jsonl, write_input

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]  # CLI runs as subprocesses

KEY_ID = "AKIDACCEPTANCE0001"
SECRET = "bedrock/secret+acceptance-7f2d"
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
AWS_ENV = aws_env(KEY_ID, SECRET)


@pytest.fixture
def bedrock() -> Iterator[EmulatorThread]:
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.2, "per_token_ms": 0}
    provider = {
        "name": "br",
        "family": "bedrock",
        "api_key": f"{KEY_ID}:{SECRET}",
        "models": [BEDROCK_MODEL],
        "limits": {"rpm": 10**6, "tpm": 10**8},
        "latency": latency,
    }
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": [provider]}))
    emu.start()
    yield emu
    emu.stop()


def _config(path: Path, emu: EmulatorThread, **entry: Any) -> Path:
    provider = {
        "name": "br",
        "kind": "bedrock",
        "base_url": emu.base_url("br"),
        "region": "us-east-1",
        "models": {BEDROCK_MODEL: {"rpm": 6000, "tpm": 10**7}},  # Bedrock's quotas are per model
        **entry,
    }
    data = {
        "providers": [provider],
        "routes": [{"model": MODEL, "targets": [f"br:{BEDROCK_MODEL}"]}],
        "settings": {"concurrency": 16, "retry": {"max_attempts": 3, "base_delay": 0.05, "max_delay": 0.2}},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse-stream"])
def test_a_kind_bedrock_provider_completes_every_line(
    cli: Cli, bedrock: EmulatorThread, stream: bool
) -> None:
    n = 60
    src = write_input(cli.cwd / "in.jsonl", n)
    with src.open("ab") as f:  # one line Converse cannot carry: refused by name before the job
        line = {
            "custom_id": "seeded",
            "model": MODEL,
            "messages": [{"role": "user", "content": "x"}],
            "seed": 7,
        }
        f.write(orjson.dumps(line) + b"\n")
    out = cli.cwd / "out.jsonl"
    cli.env.update(AWS_ENV)
    cfg = _config(cli.cwd / "gw.yaml", bedrock, stream=stream)
    refused = cli.run("run", str(src), "--config", str(cfg), "--output", str(out))
    assert refused.returncode != 0
    assert f"in.jsonl:{n + 1}: field 'seed' cannot be sent to bedrock" in refused.stderr
    assert not out.exists()
    assert bedrock.stats()["providers"]["br"]["completed"] == 0  # nothing was sent
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--skip-invalid")
    assert out.exists(), done.stderr
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    for row in rows:
        assert row["error"] is None, row
        assert row["response"]["body"]["object"] == "chat.completion"
        assert row["response"]["body"]["model"] == BEDROCK_MODEL
    stats = bedrock.stats()["providers"]["br"]
    assert stats["completed"] == n
    assert stats["rejected"]["auth"] == 0
    secrets = [*cli.transcript, out.read_text(), (cli.cwd / "out.jsonl.report.json").read_text()]
    assert not any(SECRET in text for text in secrets)
    assert SECRET.encode() not in cli.store.read_bytes()


def test_no_credentials_is_a_one_line_error(cli: Cli, bedrock: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 3)
    cli.env.update({k: v for k, v in AWS_ENV.items() if not k.startswith("AWS_ACCESS") and "SECRET" not in k})
    cli.env.update({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""})
    cfg = _config(cli.cwd / "gw.yaml", bedrock)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(cli.cwd / "out.jsonl"))
    assert done.returncode != 0
    assert "no AWS credentials found" in done.stderr
    assert "Traceback" not in done.stderr
    assert bedrock.stats()["providers"]["br"]["admitted"] == 0


def test_the_example_config_runs_on_its_embedded_emulator(cli: Cli) -> None:
    """examples/bedrock.yaml as the README gives it: the embedded emulator checks the signatures
    made with the credentials its comment exports."""
    root = Path(__file__).resolve().parents[2]
    src = cli.cwd / "reviews.jsonl"
    src.write_bytes(
        b"".join((root / "examples" / "reviews.jsonl").read_bytes().splitlines(keepends=True)[:20])
    )
    out = cli.cwd / "out.jsonl"
    cli.env.update(
        {**AWS_ENV, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example-secret-key"}
    )
    done = cli.run("run", str(src), "--config", str(root / "examples" / "bedrock.yaml"), "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out)
    assert len(rows) == 20
    assert all(r["error"] is None and r["response"]["body"]["choices"][0]["message"]["content"] for r in rows)
