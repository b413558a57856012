"""Routing: smallest expected wait, then most headroom, then route order; none from no candidate.
Which targets are candidates (the fail-over past an open circuit) is admission's choice."""

from __future__ import annotations

import math
from dataclasses import dataclass

from batchgate.policy.routing import choose_target


@dataclass(frozen=True)
class T:
    name: str
    wait: float
    headroom: float


def pick(*targets: T) -> str | None:
    chosen = choose_target(targets, wait_of=lambda t: t.wait, headroom_of=lambda t: t.headroom)
    return None if chosen is None else chosen.name


def test_smallest_wait_wins() -> None:
    assert pick(T("a", 2.0, 1.0), T("b", 0.5, 0.0), T("c", 1.0, 1.0)) == "b"


def test_ties_broken_by_headroom_then_order() -> None:
    assert pick(T("a", 0.0, 0.2), T("b", 0.0, 0.9), T("c", 0.0, 0.5)) == "b"
    assert pick(T("a", 0.0, 0.5), T("b", 0.0, 0.5)) == "a"


def test_no_candidate_no_choice() -> None:
    assert pick() is None


def test_infinite_or_nan_wait_is_never_chosen() -> None:
    assert pick(T("a", math.inf, 1.0), T("b", 9.0, 0.0)) == "b"
    assert pick(T("a", math.nan, 1.0)) is None
    assert pick(T("a", math.inf, 1.0)) is None


def test_spreads_work_in_proportion_to_quota() -> None:
    # Each target drains its backlog at its own rate; always sending to the soonest one makes
    # the shares follow the rates (3:1), so throughput approaches their sum.
    rates = {"big": 3.0, "small": 1.0}
    backlog = dict.fromkeys(rates, 0.0)
    sent = dict.fromkeys(rates, 0)
    for _ in range(400):
        targets = [T(n, backlog[n] / rates[n], 0.0) for n in rates]
        name = pick(*targets)
        assert name is not None
        backlog[name] += 1.0
        sent[name] += 1
    assert 290 <= sent["big"] <= 310
