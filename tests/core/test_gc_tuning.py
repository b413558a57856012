"""The collector threshold a gateway holds while it is open: raised, never lowered, put back."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from batchgate import gc_tuning
from batchgate.config import config_from_dict
from batchgate.gateway import Gateway


@pytest.fixture(autouse=True)
def restore_threshold() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    yield gc.get_threshold()
    while gc_tuning.PROCESS.holders:
        gc_tuning.let_go()
    gc.set_threshold(*before)


def test_hold_raises_and_the_last_let_go_restores(restore_threshold: tuple[int, int, int]) -> None:
    assert gc_tuning.hold(10_000)
    assert gc.get_threshold() == (10_000, *restore_threshold[1:])
    assert gc_tuning.hold(20_000)  # a second holder asking more raises it further
    assert gc.get_threshold()[0] == 20_000
    gc_tuning.let_go()
    assert gc.get_threshold()[0] == 20_000  # still held by one
    gc_tuning.let_go()
    assert gc.get_threshold() == restore_threshold


def test_never_lowers_a_higher_threshold() -> None:
    gc.set_threshold(50_000)
    assert gc_tuning.hold(10_000)
    assert gc.get_threshold()[0] == 50_000
    gc_tuning.let_go()
    assert gc.get_threshold()[0] == 50_000


def test_zero_leaves_the_collector_alone(restore_threshold: tuple[int, int, int]) -> None:
    assert not gc_tuning.hold(0)
    assert gc.get_threshold() == restore_threshold


def test_a_threshold_changed_by_somebody_else_is_not_overwritten() -> None:
    assert gc_tuning.hold(10_000)
    gc.set_threshold(3_000)  # the application decided something else meanwhile
    gc_tuning.let_go()
    assert gc.get_threshold()[0] == 3_000


def _config(threshold: int | None) -> dict[str, object]:
    settings: dict[str, object] = {} if threshold is None else {"gc_threshold": threshold}
    return {
        "providers": [{"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
        "routes": [{"model": "m", "targets": ["a"]}],
        "settings": settings,
    }


async def test_a_gateway_holds_the_threshold_while_open(restore_threshold: tuple[int, int, int]) -> None:
    cfg = config_from_dict(_config(None), environ={})
    assert cfg.settings.gc_threshold == 10_000
    async with Gateway(cfg):
        assert gc.get_threshold()[0] == 10_000
        async with Gateway(config_from_dict(_config(0), environ={})):  # opted out: no effect
            assert gc.get_threshold()[0] == 10_000
        assert gc.get_threshold()[0] == 10_000
    assert gc.get_threshold() == restore_threshold


async def test_an_opted_out_gateway_changes_nothing(restore_threshold: tuple[int, int, int]) -> None:
    async with Gateway(config_from_dict(_config(0), environ={})):
        assert gc.get_threshold() == restore_threshold
    assert gc.get_threshold() == restore_threshold


def test_holders_in_many_threads_leave_the_threshold_as_found(
    restore_threshold: tuple[int, int, int],
) -> None:

    def churn() -> None:
        for _ in range(2_000):
            gc_tuning.hold(10_000)
            gc_tuning.let_go()

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc_tuning.PROCESS.holders == 0
    assert gc.get_threshold() == restore_threshold
