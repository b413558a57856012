"""Other traffic on the key (`neighbours`): it takes its share of every limit while it is there,
and only `remaining` and 429s show it — the limits the headers report never change
(shared/PROTOCOLS.md, "Other work on the same key")."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.emulator import emulator_config_from_dict
from batchgate.emulator.config import Limits
from batchgate.emulator.limiter import Quota, RequestCost
from batchgate.emulator.modes import Enforcement, Neighbour
from batchgate.errors import ConfigError

ONE = RequestCost(tokens=0, input_tokens=0, output_tokens=0)


def _quota(*neighbours: Neighbour) -> Quota:
    # 600 rpm in a one-second bucket: 10 requests at once, 10 more a second
    return Quota(Limits(rpm=600), None, (), 1.0, 0.0, Enforcement("token_bucket", 1.0), neighbours)


def _admitted(quota: Quota, start: float, seconds: float) -> int:
    """Requests admitted one every 10 ms from `start` for `seconds`."""
    admitted = 0
    for i in range(round(seconds * 100)):
        now = start + i / 100
        quota.advance(now)
        admitted += quota.try_admit(ONE, now)[1] is None
    return admitted


def test_a_steady_neighbour_leaves_what_it_does_not_take() -> None:
    alone, shared = _quota(), _quota(Neighbour(0.3))
    assert _admitted(alone, 0.0, 10.0) == pytest.approx(10 + 100, abs=2)
    assert _admitted(shared, 0.0, 10.0) == pytest.approx(10 + 70, abs=2)
    (state,) = shared.snapshot(10.0)
    assert state.limit == 600  # the headers' limit does not change


def test_a_colleague_takes_half_while_there_and_gives_it_back_after() -> None:
    quota = _quota(Neighbour(0.5, 2.0, 4.0))
    before = _admitted(quota, 0.0, 2.0)
    during = _admitted(quota, 2.0, 2.0)
    after = _admitted(quota, 4.0, 2.0)
    assert before == pytest.approx(10 + 20, abs=2)
    assert during == pytest.approx(10, abs=2)
    assert after == pytest.approx(20, abs=2)


@pytest.mark.parametrize(
    ("neighbours", "key"),
    [
        ([{"share": 1.5}], "providers[0].neighbours[0].share"),
        ([{"share": 0.5, "from": 6, "until": 2}], "providers[0].neighbours[0].until"),
        ([{"share": 0.5, "when": 1}], "providers[0].neighbours[0]"),
        ({"share": 0.5}, "providers[0].neighbours"),
    ],
)
def test_bad_neighbours_name_the_key(neighbours: Any, key: str) -> None:
    provider = {"name": "p", "family": "openai", "limits": {"rpm": 60}, "neighbours": neighbours}
    with pytest.raises(ConfigError) as info:
        emulator_config_from_dict({"providers": [provider]})
    assert f"{key}:" in str(info.value) or f"{key} " in str(info.value)
