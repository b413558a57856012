"""`batchgate.Job` in process: an iterable input, results as they land, fan-out and pipelines from
Python, a progress callback, and `run()` where an event loop already runs (a notebook cell)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import batchgate
from batchgate.emulator import EmulatorThread

from .graph_harness import ROUTES, graph_config, mood_of, write_pipeline
from .harness import input_line, prompt

pytestmark = pytest.mark.acceptance


async def test_results_land_one_per_route_and_the_report_is_the_clis(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    n = 20
    cfg = graph_config(tmp_path / "gw.yaml", emu)
    seen: list[dict[str, Any]] = []
    job = batchgate.Job(
        (input_line(i, mood_of(i)) for i in range(n)),
        config=cfg,
        output=tmp_path / "out.jsonl",
        store=tmp_path / "jobs.db",
        fanout=list(ROUTES),
        on_progress=seen.append,
    )
    results = [r async for r in job.results()]
    assert job.exit_code == 0
    assert sorted((r.custom_id, r.step) for r in results) == sorted(
        (f"item-{i:05d}", route) for i in range(n) for route in ROUTES
    )
    assert all(r.ok and r.answer == mood_of(int(r.custom_id[5:])) for r in results)
    report = job.report()
    assert report == orjson.loads((tmp_path / "out.jsonl.report.json").read_bytes())
    assert report["graph"]["steps"]["gamma-3.5"]["succeeded"] == n
    assert any(e.get("event") == "finished" for e in seen)
    assert (tmp_path / "out.jsonl.input.jsonl").exists()  # the iterable, kept so the job can resume
    again = batchgate.Job(
        (input_line(i, mood_of(i)) for i in range(n)),
        config=cfg,
        output=tmp_path / "out.jsonl",
        store=tmp_path / "jobs.db",
        fanout=list(ROUTES),
    )
    assert (await again.arun())["batch_id"] == report["batch_id"]  # the same job: nothing left to send
    assert emu.stats()["providers"]["alpha"]["admitted"] == n


async def test_run_works_where_a_loop_is_already_running(tmp_path: Path, emu: EmulatorThread) -> None:
    n = 9
    src = tmp_path / "reviews.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"text": prompt(i, mood_of(i))}) + b"\n" for i in range(n)))
    cfg = graph_config(tmp_path / "gw.yaml", emu)
    job = batchgate.Job(
        src,
        config=cfg,
        output=tmp_path / "out.jsonl",
        store=tmp_path / "jobs.db",
        pipeline=write_pipeline(tmp_path / "p.yaml"),
    )
    report = job.run()  # called from inside a running event loop, as in a Jupyter cell
    assert report["status"] == "completed"
    rows = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [r["answers"]["summary"]["status"] for r in rows] == [
        "succeeded" if mood_of(i) == "negative" else "skipped" for i in range(n)
    ]
