"""A server job's report shows its own per-provider traffic, not the shared gateway's: two jobs run
at once on one server (one gateway) against the emulator, and each report's request and answer
counts are its own items' attempts, which add up to the gateway's totals (`provider_state`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from batchgate.emulator import EmulatorThread

from .harness import GAMMA, LAG, SPREAD, Server, gateway_config, running
from .jobs_client import JobsClient, requests_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # two jobs at once on slow answers


@pytest.fixture
def own_server(tmp_path: Path, emu: EmulatorThread) -> Iterator[Server]:
    """A server of its own (its gateway has seen no other test's traffic), hedging off so that
    every request sent is an attempt of some item."""
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["settings"]["timeouts"]["hedge"] = False
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    with running(tmp_path, config) as s:
        yield s


def _report(server: Server, key: str, job_id: str) -> dict[str, Any]:
    r = httpx.get(
        f"{server.url}/v1/dashboard/jobs/{job_id}", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    assert r.status_code == 200, r.text
    report: dict[str, Any] = r.json()["page"]["report"]
    return report


def _traffic(report: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per provider (that this job sent to): requests sent and answers."""
    return {
        name: (p["request_count"], p["success_count"])
        for name, p in report["providers"].items()
        if p["request_count"]
    }


def test_two_jobs_at_once_each_report_their_own_provider_figures(own_server: Server) -> None:
    key = own_server.keys_create()
    c = JobsClient(own_server, key)
    try:
        # both send to lag (1 s an answer) at the same time; each has a provider of its own too
        first = c.create(requests=[*requests_for(LAG, 6, "one-l"), *requests_for(SPREAD, 8, "one-s")])
        second = c.create(requests=[*requests_for(LAG, 4, "two-l"), *requests_for(GAMMA, 5, "two-g")])
        done = [c.wait_state(job["id"]) for job in (first, second)]
    finally:
        c.close()
    assert [d["state"] for d in done] == ["completed", "completed"], done
    reports = [_report(own_server, key, d["id"]) for d in done]
    for detail, report in zip(done, reports, strict=True):
        # the job's items' attempts and answers, per provider that answered them (from the store)
        items = {name: (p["attempts"], p["succeeded"]) for name, p in detail["providers"].items()}
        assert _traffic(report) == items, (report["providers"], detail["providers"])
        assert report["success_count"] == sum(ok for _, ok in items.values())
        for state in report["provider_state"].values():
            assert state["scope"] == "gateway"
    assert _traffic(reports[0])["lag"] == (6, 6)
    assert _traffic(reports[1])["lag"] == (4, 4)
    assert "gamma" in _traffic(reports[1])
    # the gateway's totals, as the job ending last saw them: both jobs' traffic, summed
    names = set(_traffic(reports[0])) | set(_traffic(reports[1]))
    for name in names:
        total = max(r["provider_state"][name]["requests"] for r in reports)
        assert total == sum(_traffic(r).get(name, (0, 0))[0] for r in reports), name
        assert total > max(_traffic(r).get(name, (0, 0))[0] for r in reports) or name != "lag"
