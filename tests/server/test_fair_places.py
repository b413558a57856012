"""Run places shared by key first (issue 40): one key holds at most its share of `--max-jobs`, a
freed place goes to the key running the fewest, and priorities order the jobs within a key —
`Places` on one loop, no sleeping."""

from __future__ import annotations

import asyncio

from batchgate.server.batch_api.priorities import Places, PriorityShares


async def _arrive(places: Places, started: list[str], name: str) -> None:
    owner, priority = name.split("-")[:2]
    await places.acquire(priority, owner)
    started.append(name)


def test_one_key_holds_at_most_its_share_and_another_key_starts_at_once() -> None:
    async def go() -> tuple[list[str], int]:
        places, started = Places(6, per_owner=3), list[str]()
        a = [asyncio.ensure_future(_arrive(places, started, f"a-normal-{i}")) for i in range(6)]
        await asyncio.sleep(0)
        b = asyncio.ensure_future(_arrive(places, started, "b-normal-0"))
        await asyncio.sleep(0)
        held = places.held("a")
        for task in [*a, b]:
            task.cancel()
        await asyncio.gather(*a, b, return_exceptions=True)
        return started, held

    started, held = asyncio.run(go())
    assert held == 3
    assert started == ["a-normal-0", "a-normal-1", "a-normal-2", "b-normal-0"]


def test_a_freed_place_goes_to_the_key_running_the_fewest_then_by_priority() -> None:
    async def go() -> list[str]:
        places, started = Places(2), list[str]()
        await places.acquire("normal", "a")
        await places.acquire("normal", "a")  # a holds both places
        names = ["a-high-1", "a-normal-2", "b-low-1", "b-high-2", "c-normal-1"]
        tasks = [asyncio.ensure_future(_arrive(places, started, n)) for n in names]
        await asyncio.sleep(0)
        places.release("a")  # a runs one, b and c none: b's (it waited first), its HIGH first
        places.release("a")  # a none, b one, c none: a's (waiting since before c)
        places.release("b")  # a one, b none, c none: b's
        await asyncio.sleep(0)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return started

    assert asyncio.run(go()) == ["b-high-2", "a-high-1", "b-low-1"]


class _Engine:
    limit = 0

    def set_concurrency(self, limit: int) -> None:
        self.limit = limit


def test_the_gateway_is_shared_by_key_first_then_by_weight_within_a_key() -> None:
    shares = PriorityShares(24)
    a = [_Engine() for _ in range(5)]
    for i, engine in enumerate(a):
        shares.started(f"a{i}", engine, "high" if i == 0 else "normal", "a")
    b = _Engine()
    shares.started("b0", b, "normal", "b")
    assert b.limit == 12  # half the gateway: as much as A's five jobs together
    assert [e.limit for e in a] == [4, 2, 2, 2, 2]  # A's 12 by weight: 6 and 3 of 18 each
