"""`batchgate run --pipeline`: steps per input line, conditions that send nothing when false, and
kill -9 at random moments that loses nothing and re-sends nothing that succeeded."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread

from .graph_harness import graph_config, mood_of, write_pipeline, write_reviews
from .harness import (
    Cli,
    expected_ids,
    ids_once,
    kill_hard,
    one_error_line,
    provider_totals,
    read_jsonl,
    wait_for,
)

pytestmark = pytest.mark.acceptance


def _run(cli: Cli, src: Path, cfg: Path, pipe: Path, out: Path) -> None:
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--pipeline", str(pipe),
                   "--progress", "quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.slow  # several CLI runs
def test_a_step_runs_only_where_its_condition_holds(cli: Cli, emu: EmulatorThread) -> None:
    n = 30
    src = write_reviews(cli.cwd / "in.jsonl", n)
    cfg = graph_config(cli.cwd / "gw.yaml", emu)
    out = cli.cwd / "out.jsonl"
    _run(cli, src, cfg, write_pipeline(cli.cwd / "p.yaml"), out)
    stats = emu.stats()["providers"]
    negatives = sum(mood_of(i) == "negative" for i in range(n))
    assert stats["alpha"]["admitted"] == n  # classify, on r-alpha
    assert stats["gamma"]["admitted"] == negatives  # summary, on gamma-3.5, only where negative
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    for row in rows:
        i = int(row["custom_id"].split("-")[1])
        classify, summary = row["answers"]["classify"], row["answers"]["summary"]
        assert classify["status"] == "succeeded"
        assert classify["answer"] == mood_of(i)
        if mood_of(i) == "negative":
            assert summary["status"] == "succeeded"
            assert summary["provider"] == "gamma"
            assert "awful broken" in summary["answer"]  # the summary of this item's own text
        else:
            assert summary == {"status": "skipped", "route": "gamma-3.5"}
    steps = cli.report(cli.status()["job"])["graph"]["steps"]
    assert (steps["summary"]["sent"], steps["summary"]["skipped"]) == (negatives, n - negatives)


def test_a_condition_that_never_holds_sends_nothing(cli: Cli, emu: EmulatorThread) -> None:
    n = 12
    src = write_reviews(cli.cwd / "in.jsonl", n)
    cfg = graph_config(cli.cwd / "gw.yaml", emu)
    _run(cli, src, cfg, write_pipeline(cli.cwd / "p.yaml", equals="furious"), cli.cwd / "out.jsonl")
    stats = emu.stats()["providers"]
    assert (stats["alpha"]["admitted"], stats["gamma"]["admitted"]) == (n, 0)
    rows = read_jsonl(cli.cwd / "out.jsonl")
    assert [r["answers"]["summary"]["status"] for r in rows] == ["skipped"] * n


def test_bad_pipeline_and_input_are_one_line_errors(cli: Cli, emu: EmulatorThread) -> None:
    src = write_reviews(cli.cwd / "in.jsonl", 3)
    cfg = graph_config(cli.cwd / "gw.yaml", emu)
    pipe = cli.cwd / "p.yaml"
    pipe.write_text(
        "steps:\n  - {name: a, route: r-alpha, prompt: '{{ text.__class__() }}'}\n", encoding="utf-8"
    )
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "o.jsonl", "--pipeline", str(pipe))
    assert done.returncode == 2
    assert "steps[0].prompt" in one_error_line(done.stderr)
    pipe.write_text("steps:\n  - {name: a, route: r-alpha, prompt: '{{ title }}'}\n", encoding="utf-8")
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "o.jsonl", "--pipeline", str(pipe))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    *listed, last = done.stderr.splitlines()  # every bad line is listed, in order, then the error
    assert "in.jsonl:1: field 'title' used by the pipeline's templates is missing" in listed[0]
    assert last.startswith("batchgate: error: ")
    assert "3 invalid lines" in last
    assert "the first on line 1" in last
    assert provider_totals(emu)["admitted"] == 0


@pytest.mark.slow  # several CLI runs
def test_pipeline_killed_5_times_then_resumed_loses_and_resends_nothing(
    cli: Cli, emu: EmulatorThread
) -> None:
    n = 240
    src = write_reviews(cli.cwd / "in.jsonl", n)
    cfg = graph_config(cli.cwd / "gw.yaml", emu, concurrency=12)
    pipe = write_pipeline(cli.cwd / "p.yaml", route2="r-alpha")
    out = cli.cwd / "out.jsonl"
    negatives = sum(mood_of(i) == "negative" for i in range(n))
    tasks = n + negatives
    argv = (
        "run",
        str(src),
        "--config",
        str(cfg),
        "--output",
        str(out),
        "--pipeline",
        str(pipe),
        "--progress",
        "quiet",
    )
    rng = random.Random(17)
    lost_so_far = 0
    for kill in range(5):
        start = provider_totals(emu)["completed"]
        proc = cli.start(*argv)
        target = start + rng.randint(5, tasks // 8)
        wait_for(lambda t=target: provider_totals(emu)["completed"] >= t, f"answers before kill {kill + 1}")  # type: ignore[misc]
        kill_hard(proc)
        wait_for(lambda: provider_totals(emu)["in_flight"] == 0, "the killed run's requests to drain")
        totals = provider_totals(emu)
        # A request sent again is one whose answer a kill lost (answered, never stored): never a
        # task already stored as succeeded.
        assert totals["duplicates"] <= lost_so_far
        lost_so_far = totals["completed"] - cli.status()["succeeded"]
    _run(cli, src, cfg, pipe, out)
    totals = provider_totals(emu)
    assert totals["duplicates"] <= lost_so_far
    assert totals["completed"] - totals["duplicates"] == tasks  # every task answered, each prompt once
    rows = read_jsonl(out)
    assert ids_once(rows) == expected_ids(n)
    for row in rows:
        i = int(row["custom_id"].split("-")[1])
        answers = row["answers"]
        assert answers["classify"]["answer"] == mood_of(i)
        assert answers["summary"]["status"] == ("succeeded" if mood_of(i) == "negative" else "skipped")
    assert cli.status()["succeeded"] == tasks
