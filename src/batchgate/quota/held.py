"""A reservation held by whoever took it, settled exactly once whatever ends its attempt.

Taking quota (`QuotaPool.acquire` / `try_acquire`) gives a `Reservation`; the caller wraps it at
once in a `Held` and closes that in a `finally` (or uses it as an async context manager). An
attempt settles it with what it learned (`settle`: an answer, a 429, unsent...); if nothing did —
a 5xx, a timeout, a reset, a garbled answer, a bug, the attempt or a hedge leg cancelled, the job
stopping — `close` settles it with what is known: "not sent" (refunded) until its request was
handed to the wire (`on_wire`), "sent, cost unknown" after (kept as charged). So no path leaks
one (each stayed open for good, and every later price rise charged it again: issue 38), and none
settles one twice: a second `QuotaPool.settle` is a no-op, counted in `QuotaStats.settled_twice`.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from batchgate.quota.limits import SENT_UNKNOWN, UNSENT, Outcome, Reservation

if TYPE_CHECKING:
    from batchgate.quota.pool import QuotaPool


class Held:
    """One reservation until settled; see the module docstring."""

    __slots__ = ("pool", "reservation", "sent")

    def __init__(self, pool: QuotaPool, reservation: Reservation) -> None:
        self.pool = pool
        self.reservation = reservation
        self.sent = False  # handed to the wire: from then on the provider may have charged it

    def on_wire(self, *, restamp: bool = True) -> None:
        """Its request is handed to the client now: the window counts from now (`QuotaPool.sent`;
        `restamp=False` where the transport says so itself as the bytes leave, `providers.wire`),
        and an ending nobody explains keeps it as charged."""
        self.sent = True
        if restamp:
            self.pool.sent(self.reservation)
        self.pool.learning.output_hold.sent(self.reservation)  # the provider holds its output now

    def settle(self, outcome: Outcome) -> bool:
        """Settle it with what its attempt learned (`QuotaPool.settle`)."""
        return self.pool.settle(self.reservation, outcome)

    def close(self) -> None:
        """Settle it with what is known, unless that was done: the one call of a `finally`."""
        if not self.reservation.settled:
            self.pool.settle(self.reservation, SENT_UNKNOWN if self.sent else UNSENT)

    async def __aenter__(self) -> Held:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
