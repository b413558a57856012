"""The README's dashboard pictures, taken in headless Chromium (Playwright over Debian's chromium):
`batchgate serve` with the emulator (one provider failing one request in eight), three jobs, and

    docs/dashboard.png     the jobs list while they run
    docs/job-page.png      a finished job's page (throughput, 429s, latency, errors)
    docs/providers.png     the providers page (requests against the limit, bucket in use)
    docs/report-page.png   `batchgate report JOB --html` of that job, opened from disk

    python scripts/screenshots.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, ViewportSize, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
# tests/, as pytest puts it on the path: the helpers of the browser tests
sys.path[:0] = [str(ROOT / "tests")]

from server.harness import PROVIDER_KEY, Server, start_server  # noqa: E402
from web.conftest import requests, web_config, web_emulator  # noqa: E402

DOCS = ROOT / "docs"
VIEW: ViewportSize = {"width": 1280, "height": 860}


def _open(page: Page, server: Server, key: str, hash_: str) -> None:
    page.goto(f"{server.url}/?poll=500{hash_}")
    page.get_by_label("Client key").fill(key)
    page.get_by_role("button", name="Use key").click()


def _wait_ended(http: httpx.Client, job_id: str) -> None:
    deadline = time.monotonic() + 120
    while http.get(f"/v1/jobs/{job_id}").json()["state"] not in ("completed", "failed", "cancelled"):
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id} did not end")
        time.sleep(0.2)


def main() -> None:
    emu = web_emulator()
    root = Path(tempfile.mkdtemp(prefix="bg-shots-"))
    server = start_server(root, web_config(root / "gateway.yaml", emu), "--sample-every", "1")
    try:
        key = server.keys_create()
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        wanted = (("nightly-eval", "high", 150), ("summaries", "normal", 220), ("backfill", "low", 400))
        made = [
            http.post("/v1/jobs", json={"name": name, "priority": prio, "requests": requests(n, name)}).json()
            for name, prio, n in wanted
        ]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium")
            page = browser.new_page(viewport=VIEW)
            _open(page, server, key, "#/jobs")
            page.wait_for_selector("#jobs")
            time.sleep(6)  # a picture of jobs under way
            page.screenshot(path=str(DOCS / "dashboard.png"))
            _wait_ended(http, made[0]["id"])
            time.sleep(1.5)
            page.goto(f"{server.url}/?poll=500#/jobs/{made[0]['id']}")
            page.wait_for_selector(".chart canvas")
            page.screenshot(path=str(DOCS / "job-page.png"), full_page=True)
            page.goto(f"{server.url}/?poll=500#/providers")
            page.wait_for_selector("#provider-charts .chart canvas")
            page.screenshot(path=str(DOCS / "providers.png"), full_page=True)
            store_job = http.get(f"/v1/dashboard/jobs/{made[0]['id']}").json()["page"]["job"]
            out = root / "report.html"
            argv = [sys.executable, "-m", "batchgate", "report", store_job, "--store", str(root / "jobs.db")]
            subprocess.run([*argv, "--html", str(out)], check=True)
            assert PROVIDER_KEY not in out.read_text(encoding="utf-8")
            page.goto(out.as_uri())
            page.wait_for_selector(".chart canvas")
            page.screenshot(path=str(DOCS / "report-page.png"), full_page=True)
            browser.close()
        for job in made:
            http.post(f"/v1/jobs/{job['id']}/cancel")
    finally:
        server.stop()
        emu.stop()
        shutil.rmtree(root, ignore_errors=True)
    print("wrote", ", ".join(f"docs/{n}.png" for n in ("dashboard", "job-page", "providers", "report-page")))


if __name__ == "__main__":
    main()
