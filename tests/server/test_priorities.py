"""Priorities are weighted shares of the shared gateway: the limits (6/3/1 of its concurrency,
rounded up, all of it for a job alone, set again as jobs start and end), and over real
sockets three equal jobs on one constrained provider, started together (one `not_before`), where high
finishes first while low still advances."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.emulator import EmulatorThread
from batchgate.server.batch_api.priorities import PriorityShares
from waiting import poll

from .harness import LAG, emulator, running
from .jobs_client import JobsClient, requests_for

CONCURRENCY = 10
ITEMS = 24
START_IN_S = 2.0  # all three start together at their `not_before`


class Engine:
    def __init__(self) -> None:
        self.limit: int | None = None

    def set_concurrency(self, limit: int) -> None:
        self.limit = limit


def test_the_limits_follow_the_weights_of_the_running_jobs() -> None:
    shares = PriorityShares(CONCURRENCY)
    high, normal, low = Engine(), Engine(), Engine()
    shares.started("low", low, "low")
    assert low.limit == CONCURRENCY  # alone: the whole gateway
    shares.started("high", high, "high")
    shares.started("normal", normal, "normal")
    assert (high.limit, normal.limit, low.limit) == (6, 3, 1)
    shares.ended("high")
    assert (normal.limit, low.limit) == (8, 3)  # 7.5 and 2.5, rounded up
    shares.ended("normal")
    shares.ended("normal")  # twice: no harm
    assert low.limit == CONCURRENCY
    tiny = PriorityShares(2)
    for name in ("a", "b", "c"):
        tiny.started(name, Engine(), "low")
    tiny.started("h", Engine(), "high")
    assert min(tiny.limits().values()) == 1  # never starved


@pytest.fixture
def own_emu() -> Iterator[EmulatorThread]:
    thread = emulator()
    try:
        yield thread
    finally:
        thread.stop()


def one_provider_config(path: Path, emu: EmulatorThread) -> Path:
    """Only `lag` (1 s an answer) behind a gateway of CONCURRENCY places: the constrained provider."""
    data: dict[str, Any] = {
        "providers": [
            {"name": "lag", "kind": "openai", "base_url": emu.base_url("lag"), "api_key_env": "EMU_KEY"}
        ],
        "routes": [{"model": LAG, "targets": ["lag:gpt-4o-mini"]}],
        "settings": {"concurrency": CONCURRENCY, "seed": 1},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.slow  # three jobs of 1 s answers
@pytest.mark.integration
def test_high_finishes_first_and_low_still_advances(tmp_path: Path, own_emu: EmulatorThread) -> None:
    with running(tmp_path, one_provider_config(tmp_path / "gateway.yaml", own_emu)) as server:
        c = JobsClient(server, server.keys_create())
        try:
            at = time.time() + START_IN_S
            ids = {
                p: c.create(requests=requests_for(LAG, ITEMS, p), priority=p, not_before=at)["id"]
                for p in ("low", "normal", "high")
            }
            # the order the test needs, checked rather than assumed: all three made before any began
            made = {p: c.get(job_id)["state"] for p, job_id in ids.items()}
            assert set(made.values()) == {"scheduled"}, f"made after their start ({START_IN_S} s): {made}"
            high = poll(
                lambda: c.get(ids["high"]), lambda job: job["state"] == "completed", "the high job to end"
            )
            normal, low = c.get(ids["normal"]), c.get(ids["low"])
            for job_id in ids.values():
                assert c.wait_state(job_id)["state"] == "completed"
        finally:
            c.close()
    assert high["progress"]["succeeded"] == ITEMS
    assert normal["progress"]["pending"] > 0, normal  # high finished first, though submitted last
    assert low["progress"]["pending"] > 0, low
    assert low["progress"]["succeeded"] > 0, low  # low advanced while high ran: not starved
