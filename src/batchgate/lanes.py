"""Two waiting lanes, urgent then ordinary: the line under every waiting place in batchgate.

The quota pool's FIFO gate, the shared quota's take turns, the in-flight cap and the fair slots
each keep their waiters here and decide for themselves when the head may go. `Lanes` owns only
the line: a waiter joins the urgent lane (live requests, hedges) or the ordinary one; every urgent
waiter is served before every ordinary one, each lane first in, first out.

A waiter is a future, or an owner's record answering for the future it holds. A waiter whose
caller was cancelled is done at once but stays in its lane until its task resumes; `head()` and
`popleft()` drop such waiters from the front as they meet them, `len()` still counts them. When
the task resumes, `leave()` takes the waiter out, or tells its owner that a turn had already been
handed to it in that instant, so the owner passes the turn on to the next waiter.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar


class Waiting(Protocol):
    """What `Lanes` asks of a waiter: the questions an `asyncio.Future` answers."""

    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def exception(self) -> BaseException | None: ...


W = TypeVar("W", bound=Waiting)
T = TypeVar("T")
R = TypeVar("R")


class Held(Generic[T, R]):
    """An owner's record: the `item` waiting and the future its turn resolves, answering for it."""

    __slots__ = ("future", "item")

    def __init__(self, item: T, future: asyncio.Future[R]) -> None:
        self.item = item
        self.future = future

    def done(self) -> bool:
        return self.future.done()

    def cancelled(self) -> bool:
        return self.future.cancelled()

    def exception(self) -> BaseException | None:
        return self.future.exception()


class Lanes(Generic[W]):
    """Waiters in two FIFO lanes, urgent first; see the module docstring."""

    __slots__ = ("_ordinary", "_urgent")

    def __init__(self) -> None:
        self._urgent: deque[W] = deque()
        self._ordinary: deque[W] = deque()

    def append(self, waiter: W, *, urgent: bool) -> None:
        """Queue `waiter` behind every waiter of its lane (an urgent one: ahead of every ordinary)."""
        (self._urgent if urgent else self._ordinary).append(waiter)

    def ahead_of(self, urgent: bool) -> bool:
        """Whether a newcomer of this urgency would queue behind somebody: anybody in the urgent
        lane, or, for an ordinary newcomer, in either lane (done waiters not yet dropped count)."""
        return bool(self._urgent) or (not urgent and bool(self._ordinary))

    def head(self) -> W | None:
        """The first waiter not done (urgent lane first), dropping done ones from the front."""
        for lane in (self._urgent, self._ordinary):
            while lane and lane[0].done():
                lane.popleft()
            if lane:
                return lane[0]
        return None

    def popleft(self) -> W | None:
        """Take the head (as `head()` finds it) out of its lane; None when nobody waits."""
        head = self.head()
        if head is not None:
            (self._urgent or self._ordinary).popleft()
        return head

    def remove(self, waiter: W) -> bool:
        """Take `waiter` out of whichever lane holds it; False when neither does."""
        for lane in (self._urgent, self._ordinary):
            try:
                lane.remove(waiter)
            except ValueError:
                continue
            return True
        return False

    def leave(self, waiter: W) -> bool:
        """`waiter`'s caller was cancelled while it waited. True when the waiter had already been
        handed its turn (done with a result): it is out of its lane, and the owner must give the
        turn back so that it passes on to the next waiter. Otherwise the waiter leaves its lane
        (unless a wake dropped it already) and False."""
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            return True
        self.remove(waiter)
        return False

    def pending(self) -> int:
        """How many waiters are not done."""
        return sum(1 for waiter in self if not waiter.done())

    def clear(self) -> list[W]:
        """Empty both lanes; the waiters they held, head first."""
        waiters = list(self)
        self._urgent.clear()
        self._ordinary.clear()
        return waiters

    def __iter__(self) -> Iterator[W]:
        """Every waiter, done ones included: the urgent lane head first, then the ordinary one."""
        yield from self._urgent
        yield from self._ordinary

    def __len__(self) -> int:
        """Every waiter still in a lane, done ones not yet dropped included."""
        return len(self._urgent) + len(self._ordinary)

    def __bool__(self) -> bool:
        return bool(self._urgent) or bool(self._ordinary)

    def __repr__(self) -> str:
        return f"Lanes(urgent={len(self._urgent)}, ordinary={len(self._ordinary)})"
