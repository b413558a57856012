"""The dashboard in headless Chromium against `batchgate serve` and the emulator: two jobs listed,
a progress bar that advances, a job page with charts that have points and its errors, and Cancel
on the page stopping a job (checked through the API). Plus its HTTP surface without a browser:
the data needs a key, the page does not, and no provider key is on any of it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from server.harness import PROVIDER_KEY, Server
from server.jobs_client import JobsClient
from waiting import WAIT_LIMIT_S

from .conftest import requests

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # a server, and Chromium
WAIT_MS = WAIT_LIMIT_S * 1000


@pytest.fixture(scope="module")
def key(web_server: Server) -> str:
    return web_server.keys_create()


@pytest.fixture
def jobs(web_server: Server, key: str) -> Iterator[JobsClient]:
    c = JobsClient(web_server, key)
    try:
        yield c
    finally:
        c.close()


def _page(browser: Browser, server: Server, key: str, hash_: str = "#/jobs") -> Page:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server.url}/?poll=300{hash_}")
    page.get_by_label("Client key").fill(key)
    page.get_by_role("button", name="Use key").click()
    return page


def _points(page: Page) -> list[int]:
    found: list[str] = page.eval_on_selector_all(
        ".chart[data-points]", "els => els.map(e => e.dataset.points)"
    )
    return [int(n) for n in found]


def test_lists_both_jobs_and_a_progress_bar_advances(
    browser: Browser, web_server: Server, key: str, jobs: JobsClient
) -> None:
    first = jobs.create(name="first", requests=requests(100, "first"), priority="high")
    second = jobs.create(name="second", requests=requests(40, "second"))
    page = _page(browser, web_server, key)
    try:
        for job in (first, second):
            page.wait_for_selector(f"tr[data-job='{job['id']}']", timeout=WAIT_MS)
        bar = page.get_by_label("Progress of first")
        seen = int(bar.get_attribute("value") or 0)
        bar_value = "document.querySelector(\"progress[aria-label='Progress of first']\").value"
        page.wait_for_function(
            f"([seen]) => Number({bar_value}) > seen",
            arg=[seen],
            timeout=WAIT_MS,
        )
        row = page.locator(f"tr[data-job='{first['id']}']")
        assert "high" in row.inner_text()
        jobs.wait_state(first["id"])
        jobs.wait_state(second["id"])
    finally:
        page.close()


def test_job_page_shows_charts_with_points_and_its_errors(
    browser: Browser, web_server: Server, key: str, jobs: JobsClient
) -> None:
    job = jobs.create(name="charted", requests=requests(50, "charted"))
    ended = jobs.wait_state(job["id"])
    assert ended["request_counts"]["failed"] > 0  # the emulator's 500s: something to show
    page = _page(browser, web_server, key, f"#/jobs/{job['id']}")
    try:
        page.wait_for_selector("#errors-by-kind", timeout=WAIT_MS)
        page.wait_for_selector(".chart canvas", timeout=WAIT_MS)
        assert max(_points(page)) > 0
        assert "server_error" in page.locator("#errors-by-kind").inner_text()
        assert page.locator("#first-failures tr").count() > 1
        assert PROVIDER_KEY not in page.content()
    finally:
        page.close()


def test_cancel_on_the_job_page_stops_the_job(
    browser: Browser, web_server: Server, key: str, jobs: JobsClient
) -> None:
    job = jobs.create(name="long", requests=requests(600, "long"))
    page = _page(browser, web_server, key, f"#/jobs/{job['id']}")
    try:
        button = page.get_by_role("button", name="Cancel job long")
        button.wait_for(timeout=WAIT_MS)
        page.wait_for_function("() => !document.querySelector('#cancel').disabled", timeout=WAIT_MS)
        button.click()
        ended = jobs.wait_state(job["id"])
        assert ended["state"] == "cancelled"
        assert ended["request_counts"]["pending"] > 0  # stopped well before its end
        page.wait_for_function(
            "() => document.querySelector('#job-state').textContent === 'cancelled'", timeout=WAIT_MS
        )
    finally:
        page.close()


def _get(server: Server, path: str, key: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(server.url + path, headers=headers, timeout=30)


def test_the_page_is_never_framed(web_server: Server) -> None:
    for path in ("/", "/static/app.js"):
        headers = _get(web_server, path).headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"


def test_the_page_polls_no_faster_than_its_floor(browser: Browser, web_server: Server) -> None:
    page = browser.new_page()
    page.goto(f"{web_server.url}/?poll=1#/jobs")
    page.wait_for_function("document.body.dataset.poll !== undefined", timeout=WAIT_MS)
    assert int(page.evaluate("document.body.dataset.poll")) == 250  # ?poll=1 asked for 1 ms
    page.close()


def test_the_page_is_public_its_data_needs_a_key(web_server: Server, key: str, jobs: JobsClient) -> None:
    assert _get(web_server, "/").status_code == 200
    assert _get(web_server, "/static/app.js").headers["content-type"].startswith("text/javascript")
    assert _get(web_server, "/static/../harness.py").status_code == 404
    assert _get(web_server, "/static/vendor/LICENSE-uPlot").status_code == 404  # only listed types
    for path in ("/v1/dashboard/jobs", "/v1/dashboard/providers"):
        assert _get(web_server, path).status_code == 401
    job = jobs.create(name="seen", requests=requests(5, "seen"))
    jobs.wait_state(job["id"])
    other = web_server.keys_create()
    assert job["id"] not in _get(web_server, "/v1/dashboard/jobs", other).text  # another key's job
    assert _get(web_server, f"/v1/dashboard/jobs/{job['id']}", other).status_code == 404
    data: dict[str, Any] = _get(web_server, f"/v1/dashboard/jobs/{job['id']}", key).json()
    assert data["page"]["timeline"]["t"]
    ring = _get(web_server, "/v1/dashboard/providers", key)
    assert ring.json()["samples"], "the providers' quota ring is sampled"
    for r in (data, ring.text):
        assert PROVIDER_KEY not in str(r)
