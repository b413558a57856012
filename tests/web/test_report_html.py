"""`batchgate report JOB --html OUT.html`: one self-contained page written from the job store,
whose embedded data is the job's report (as `batchgate report JOB` prints it) with its timeline
and failures; opened from disk in headless Chromium it draws charts with points. Bad paths and
unknown jobs get one-line errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from batchgate.cli import main
from batchgate.emulator import EmulatorThread
from batchgate.web.report_page import embedded_data
from server.harness import PROVIDER_KEY

from .conftest import requests, web_config

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # a server, and Chromium


def _main(argv: list[str]) -> int:
    """The CLI in-process, on a thread of its own: Playwright's sync API keeps an event loop
    running on this one while a browser is open, and the CLI starts its own."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(main, argv).result()


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, web_emu: EmulatorThread) -> Path:
    """A store holding one finished job of 40 items (some failed: the emulator's 500s)."""
    root = tmp_path_factory.mktemp("report")
    lines = b"".join(orjson.dumps(r) + b"\n" for r in requests(40, "rep"))
    (root / "in.jsonl").write_bytes(lines)
    config = web_config(root / "gateway.yaml", web_emu)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EMU_KEY", PROVIDER_KEY)
        argv = ["run", str(root / "in.jsonl"), "--config", str(config), "--output", str(root / "out.jsonl")]
        code = _main([*argv, "--store", str(root / "jobs.db"), "--progress", "quiet"])
    assert code == 4, "finished with failed items"
    return root


def _report(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = _main(["report", "--store", str(root / "jobs.db"), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_page_embeds_the_jobs_report(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report(finished, capsys)
    assert code == 0
    report: dict[str, Any] = orjson.loads(out)
    code, _, _ = _report(finished, capsys, "--html", str(finished / "job.html"))
    assert code == 0
    page = (finished / "job.html").read_text(encoding="utf-8")
    data = embedded_data(page)
    assert data["report"] == report
    assert data["failures"]["counted"] == report["failed_count"] > 0
    assert sum(data["failures"]["by_kind"].values()) == report["failed_count"]
    timeline = data["timeline"]
    assert len(timeline["t"]) >= 2
    assert timeline["done"][-1] == report["task_total"]
    assert timeline["providers"]["web"]["answered"][-1] == report["success_count"]
    assert "<script src=" not in page
    assert "<link " not in page
    assert PROVIDER_KEY not in page
    assert not list(finished.glob(".job.html.*"))  # the temporary file was renamed into place


def test_bad_job_or_path_is_one_line(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _report(finished, capsys, "no-such-job", "--html", str(finished / "x.html"))
    assert code == 2
    assert err.count("\n") == 1
    assert "no-such-job" in err
    target = finished / "missing" / "x.html"
    code, _, err = _report(finished, capsys, "--html", str(target))
    assert code == 2
    assert err.count("\n") == 1
    assert str(target) in err
    assert "Traceback" not in err


def test_the_page_draws_charts_with_points(
    finished: Path, capsys: pytest.CaptureFixture[str], browser: Browser
) -> None:
    assert _report(finished, capsys, "--html", str(finished / "drawn.html"))[0] == 0
    page = browser.new_page()
    try:
        page.goto((finished / "drawn.html").as_uri())
        page.wait_for_selector(".chart canvas")
        points: list[str] = page.eval_on_selector_all(".chart", "els => els.map(e => e.dataset.points)")
        assert points
        assert max(int(n) for n in points) > 0
        assert "server_error" in page.locator("#errors-by-kind").inner_text()
    finally:
        page.close()
