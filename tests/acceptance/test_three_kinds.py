"""Issue 41's "one input file, any target": the Quick start's 2,000 reviews (examples/reviews.jsonl,
OpenAI-shaped, unchanged) on one route whose three targets are three kinds — OpenAI, Gemini and
Bedrock, each played by its own emulator on its own port — and the OpenAI one goes away mid-run
for good. The job completes: every review answered exactly once, in the OpenAI Batch output shape,
the other two kinds taking over the lines the stopped one would have had."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from awsutil import aws_env
from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from waiting import wait_for

from .harness import Cli, read_jsonl

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

REVIEWS = Path(__file__).resolve().parents[2] / "examples" / "reviews.jsonl"
GEMINI_KEY = "gemini-three-kinds-0123456789"
AWS_ID, AWS_SECRET = "AKIDTHREEKINDS", "three-kinds-secret-key"
BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
TARGETS = {"oa": "gpt-4o-mini", "gem": "gemini-2.5-flash", "br": BEDROCK_MODEL}
LATENCY = {"ttft_p50_ms": 60, "ttft_sigma": 0.3, "per_token_ms": 1}


def _emulator(name: str, family: str, **extra: Any) -> EmulatorThread:
    provider = {"name": name, "family": family, "latency": LATENCY, **extra}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 11, "providers": [provider]}))
    emu.start()
    return emu


def _config(path: Path, emus: dict[str, EmulatorThread]) -> Path:
    providers: list[dict[str, Any]] = [
        {"name": "oa", "kind": "openai", "base_url": emus["oa"].base_url("oa"), "api_key_env": "OA_KEY",
         "limits": {"rpm": 1200, "tpm": 1_000_000}},
        {"name": "gem", "kind": "gemini", "base_url": emus["gem"].base_url("gem"),
         "api_key_env": "GEMINI_API_KEY", "models": {TARGETS["gem"]: {"rpm": 900, "tpm": 1_000_000}}},
        {"name": "br", "kind": "bedrock", "base_url": emus["br"].base_url("br"), "region": "us-east-1",
         "models": {BEDROCK_MODEL: {"rpm": 900, "tpm": 1_000_000}}},
    ]  # fmt: skip
    data = {
        "providers": providers,
        "routes": [{"model": "review-classifier", "targets": [f"{n}:{m}" for n, m in TARGETS.items()]}],
        "prices": {BEDROCK_MODEL: {"input": 0.25, "output": 1.25}},
        "settings": {"retry": {"base_delay": 0.05, "max_delay": 0.5}, "circuit": {"max_outage": 2}},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _completed(emu: EmulatorThread, name: str) -> int:
    return int(emu.stats()["providers"][name]["completed"])


def test_the_quick_start_reviews_run_on_three_kinds_and_fail_over_when_one_goes_down(cli: Cli) -> None:
    emus = {
        "oa": _emulator("oa", "openai", limits={"rpm": 1200, "tpm": 1_000_000}),
        "gem": _emulator("gem", "gemini", api_key=GEMINI_KEY, models=[TARGETS["gem"]],
                         limits={"rpm": 900, "tpm": 1_000_000}),
        "br": _emulator("br", "bedrock", api_key=f"{AWS_ID}:{AWS_SECRET}", models=[BEDROCK_MODEL],
                        limits={"rpm": 900, "tpm": 1_000_000}),
    }  # fmt: skip
    src = cli.cwd / "reviews.jsonl"
    shutil.copyfile(REVIEWS, src)
    cfg = _config(cli.cwd / "three.yaml", emus)
    out = cli.cwd / "out.jsonl"
    cli.env.update(
        {
            "OA_KEY": "sk-three-kinds-0123456789",
            "GEMINI_API_KEY": GEMINI_KEY,
            **aws_env(AWS_ID, AWS_SECRET),
        }
    )
    proc = cli.start("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    stopped_at = 0
    try:
        wait_for(lambda: _completed(emus["oa"], "oa") >= 150, "150 answers from the OpenAI target first")
        stopped_at = _completed(emus["oa"], "oa")
        emus["oa"].stop()  # gone for good: its lines go to the Gemini and Bedrock targets
        code, _, err = cli.finish(proc)
        served = {n: _completed(emus[n], n) for n in ("gem", "br")}
    finally:
        for name in ("gem", "br"):
            emus[name].stop()
    assert code == 0, err
    rows = read_jsonl(out)
    inputs = read_jsonl(src)
    ids = [r["custom_id"] for r in rows]
    assert len(ids) == len(set(ids))  # each answered once
    assert set(ids) == {r["custom_id"] for r in inputs}
    for row in rows:  # the OpenAI Batch output shape, whichever kind answered
        assert row["error"] is None, row
        response = row["response"]
        assert response["status_code"] == 200
        answer = response["body"]
        assert answer["object"] == "chat.completion"
        assert answer["choices"][0]["message"]["role"] == "assistant"
        assert isinstance(answer["choices"][0]["message"]["content"], str)
        assert answer["usage"]["prompt_tokens"] > 0
    models = {r["response"]["body"]["model"] for r in rows}
    assert {TARGETS["gem"], BEDROCK_MODEL} <= models, models
    assert stopped_at >= 150
    assert served["gem"] > 0, served
    assert served["br"] > 0, served
    # the stopped target answered about `stopped_at` (a few more in flight as it stopped): the
    # rest came from the other two kinds
    assert served["gem"] + served["br"] >= len(inputs) - stopped_at - 50, (stopped_at, served)
