"""`batchgate plan` on Anthropic's OTPM (issue 39): output is held at `max_tokens` from admission to
the answer's end, then settled to the real output, so OTPM binds by what is held in flight, not by
`max_tokens` × requests; the plan names what binds with the refund and what would without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from batchgate.config import config_from_dict
from batchgate.jobs.plan import make_plan, render_plan
from batchgate.jobs.plan_limits import DEFAULT_P50_S

LIMITS = {"rpm": 4000, "itpm": 120_000, "otpm": 60_000}  # the key


def _config(**extra: Any) -> Any:
    provider = {"name": "claude", "kind": "anthropic", "base_url": "http://127.0.0.1:1", "limits": LIMITS}
    data = {"providers": [provider | extra], "routes": [{"model": "m", "targets": ["claude"]}]}
    return config_from_dict(data, source="test")


def _input(path: Path, n: int) -> Path:
    prompt = "echo " + "word " * 50  # ~80 tokens
    lines = [
        {
            "custom_id": f"c{i}",
            "model": "m",
            "max_tokens": 300,
            "messages": [{"role": "user", "content": prompt}],
        }
        for i in range(n)
    ]
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    return path


def test_plan_prices_anthropic_output_as_held_in_flight(tmp_path: Path) -> None:
    plan = make_plan(_config(), _input(tmp_path / "in.jsonl", 700))
    claude = plan["providers"]["claude"]
    seconds = claude["dimension_seconds"]
    # 700 × 300 held for the default P50 in a minute's OTPM, not 700 × 300 at 1,000 a second
    assert seconds["otpm"] == pytest.approx(700 * 300 * DEFAULT_P50_S / 60_000, abs=0.05)
    assert claude["binding_limit"] == "itpm"
    assert claude["kept_output"] == {"otpm_seconds": 210.0, "binding_limit": "otpm"}
    assert claude["quota_seconds"] == seconds["itpm"]
    text = render_plan(plan)
    assert "input tokens/min" in text
    assert "(binds first)" in text
    assert "kept at max_tokens: 210 s (binds first)" in text
    assert "output tokens/min 210 s" not in text  # was: "output tokens/min 210 s (binds first)"


def test_plan_keeps_max_tokens_for_a_provider_that_keeps_the_charge(tmp_path: Path) -> None:
    plan = make_plan(_config(output_charge="max_tokens"), _input(tmp_path / "in.jsonl", 700))
    claude = plan["providers"]["claude"]
    assert claude["dimension_seconds"]["otpm"] == 210.0
    assert claude["binding_limit"] == "otpm"
    assert "kept_output" not in claude
