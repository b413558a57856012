"""`batchgate plan` on the README's example (three providers, a Batch API, an Anthropic OTPM that
gives unused output back): its JSON and its table pinned byte for byte, as the plan printed them
before its documents were typed (issue 44)."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchgate.cli import main

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("flags", "expected"), [(["--json"], "plan_batchgate.json"), ([], "plan_batchgate.txt")]
)
def test_the_plan_prints_as_before(
    flags: list[str], expected: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    code = main(["plan", "examples/reviews.jsonl", "--config", "examples/batchgate.yaml", *flags])
    assert code == 0
    assert capsys.readouterr().out == (DATA / expected).read_text()
