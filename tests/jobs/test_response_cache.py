"""The response cache and in-job dedupe in real runs (`batchgate run` in process, its embedded
emulator over loopback HTTP): identical reusable lines are sent once; a re-run of the same file
with a cache sends nothing and writes the same answers marked `cached`, the report counting them
and what they saved; sampled requests are neither deduped nor cached; `batchgate cache` tells,
prunes and clears."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchgate.cli import main

pytestmark = pytest.mark.integration
FAST = {"ttft_p50_ms": 0, "per_token_ms": 0}


def _config(root: Path) -> Path:
    data = {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": "emulator"}],
        "routes": [{"model": "m", "targets": ["alpha:gpt-4o-mini"]}],
        "prices": {"gpt-4o-mini": {"input": 150.0, "output": 600.0}},  # large, so savings show in cents
        "emulator": {
            "providers": [
                {"name": "alpha", "family": "openai", "latency": {"ttft_p50_ms": 0, "per_token_ms": 0}}
            ]
        },
    }
    path = root / "gw.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _input(root: Path, n: int, distinct: int, **extra: Any) -> Path:
    path = root / "in.jsonl"
    lines = []
    for i in range(n):
        body = {"custom_id": f"t{i}", "model": "m", "max_tokens": 8, **extra}
        body["messages"] = [{"role": "user", "content": f"item {i % distinct}"}]
        lines.append(orjson.dumps(body))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _run(root: Path, out: str, *flags: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    argv = ["run", str(root / "in.jsonl"), "--config", str(root / "gw.yaml"), "--output", str(root / out)]
    code = main([*argv, "--store", str(root / "jobs.db"), "--progress", "quiet", *flags])
    report = orjson.loads((root / f"{out}.report.json").read_bytes())
    lines = [orjson.loads(line) for line in (root / out).read_bytes().splitlines()]
    return code, report, lines


def _requests(report: dict[str, Any]) -> int:
    return sum(p["request_count"] for p in report["providers"].values())


def test_identical_lines_are_sent_once(tmp_path: Path) -> None:
    _config(tmp_path)
    _input(tmp_path, 12, 4, temperature=0)
    code, report, lines = _run(tmp_path, "out.jsonl")
    assert code == 0
    assert _requests(report) == 4
    assert len(lines) == 12
    by_id = {line["custom_id"]: line for line in lines}
    assert (
        by_id["t0"]["response"]["body"] == by_id["t4"]["response"]["body"] == by_id["t8"]["response"]["body"]
    )
    assert report["cache"]["deduped"] == 8


def test_no_dedupe_and_sampled_lines_send_each(tmp_path: Path) -> None:
    _config(tmp_path)
    _input(tmp_path, 6, 2, temperature=0)
    code, report, _ = _run(tmp_path, "out.jsonl", "--no-dedupe")
    assert code == 0
    assert _requests(report) == 6
    _input(tmp_path, 6, 2, temperature=0.7)  # sampled: each line is its own draw
    code, report, _ = _run(tmp_path, "out2.jsonl", "--cache", str(tmp_path / "cache.db"))
    assert code == 0
    assert _requests(report) == 6
    code, report, lines = _run(tmp_path, "out3.jsonl", "--cache", str(tmp_path / "cache.db"))
    assert _requests(report) == 6  # nothing was cached
    assert not any(line.get("cached") for line in lines)


def test_a_rerun_with_a_cache_sends_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _config(tmp_path)
    _input(tmp_path, 30, 30, temperature=0)
    cache = ["--cache", str(tmp_path / "cache.db")]
    code, first, before = _run(tmp_path, "out1.jsonl", *cache)
    assert code == 0
    assert _requests(first) == 30
    assert first["cache"]["stored"] == 30
    capsys.readouterr()
    code, again, after = _run(tmp_path, "out2.jsonl", *cache)
    assert code == 0
    assert _requests(again) == 0
    assert again["cost_usd"] == 0.0
    assert again["cache"]["hits"] == 30
    assert again["cache"]["saved_usd"] == pytest.approx(first["cost_usd"])
    assert again["success_count"] == 30
    old = {line["custom_id"]: line for line in before}
    for line in after:
        assert line["cached"] is True
        assert line["response"]["body"] == old[line["custom_id"]]["response"]["body"]
        assert line["usage"] == old[line["custom_id"]]["usage"]
    err = capsys.readouterr().err
    assert "30 answers from cache, $0.00 spent, $" in err
    assert main(["cache", "stats", *cache]) == 0
    assert "30 answers" in capsys.readouterr().out
    assert main(["cache", "prune", "--older-than", "30d", *cache]) == 0
    assert "pruned 0 answers" in capsys.readouterr().out
    assert main(["cache", "clear", *cache]) == 0
    assert "cleared 30 answers" in capsys.readouterr().out


def test_a_bad_cache_flag_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "prune", "--cache", str(tmp_path / "c.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--older-than" in err[0]


def _pipeline(root: Path, summary: str) -> Path:
    steps = [
        {"name": "classify", "route": "m", "prompt": "Classify: {{ text }}", "max_tokens": 5},
        {"name": "summary", "route": "m", "prompt": f"{summary}: {{{{ text }}}}", "max_tokens": 8},
    ]
    path = root / "pipe.yaml"
    path.write_text(yaml.safe_dump({"steps": steps}), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_changed_step_re_runs_only_from_that_step(tmp_path: Path) -> None:
    config = _config(tmp_path)
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["cache"] = {"store": str(tmp_path / "cache.db"), "mode": "always"}  # a step's n=1 answers reused
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    (tmp_path / "in.jsonl").write_bytes(
        b"".join(orjson.dumps({"custom_id": f"r{i}", "text": f"review {i}"}) + b"\n" for i in range(4))
    )
    code, first, _ = _run(tmp_path, "out1.jsonl", "--pipeline", str(_pipeline(tmp_path, "Summarise")))
    assert code == 0
    assert _requests(first) == 8
    code, again, lines = _run(tmp_path, "out2.jsonl", "--pipeline", str(_pipeline(tmp_path, "Shorten")))
    assert code == 0
    assert _requests(again) == 4  # the summary step changed: it alone is sent
    assert again["cache"]["hits"] == 4  # the classify step came from the cache
    assert all(line["answers"]["summary"]["status"] == "succeeded" for line in lines)
