"""What the open reservations of one quota pool hold on its dimensions, until each is settled.

A reservation is charged on every limited dimension at admission (the pool's `_admit`); from then
on this book keeps its charges true, here and in a shared store: corrected with the provider's
real usage when its answer comes (`reconcile`, the deltas from `batchgate.quota.settle`), topped
up at once while still open when the charge model learns the provider charges more
(`reprice`, `raise_margin`: `batchgate.quota.reprice` says what each is short), given back when the
provider never admitted it (`give_back`), or kept as charged (`keep`). Exactly one of those
settles it. The book never wakes the pool's queue: the pool does, after calling it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from batchgate.clock import Clock
from batchgate.models import Usage
from batchgate.quota.dimension import Dimension
from batchgate.quota.learning import Learning
from batchgate.quota.limits import Reservation
from batchgate.quota.reprice import OpenReservations
from batchgate.quota.settle import reconcile_deltas
from batchgate.quota.shared import SharedQuota


class Reservations:
    """The book of one pool's reservations; see the module docstring."""

    __slots__ = ("_clock", "_counts", "_dims", "_learning", "_open", "name", "shared")

    def __init__(
        self,
        name: str,
        dims: Mapping[str, Dimension],
        clock: Clock,
        counts: dict[str, int],
        learning: Learning,
    ) -> None:
        self.name = name
        self._learning = learning  # what the charges are corrected by
        self._dims = dims
        self._clock = clock
        self._counts = counts  # the pool's event counters: reconciled, refunded
        self._open = OpenReservations()
        self.shared: SharedQuota | None = None  # the key's shared quota, if the pool shares it

    def add(self, res: Reservation, count: int | None) -> None:
        """`res` was just admitted, priced from our prompt `count` (None: not counted)."""
        self._open.add(res, count)

    def is_open(self, res: Reservation) -> bool:
        """Whether `res` is still to be settled (it must be this pool's)."""
        if res.pool != self.name:
            raise ValueError(f"reservation of pool {res.pool!r} settled on pool {self.name!r}")
        return not res.settled

    def reconcile(
        self,
        res: Reservation,
        usage: Usage,
        estimate: int | None,
        count: int | None,
        output_adjusted: bool | None,
    ) -> None:
        """Correct open `res` with the provider's real `usage` and settle it: what is corrected and
        why, `batchgate.quota.settle` (`estimate`: of its prompt, default `res.cost.input_tokens`;
        `count`: ours; `output_adjusted`: the provider gives unused output back, default as learned)."""
        learning = self._learning
        deltas = reconcile_deltas(
            res,
            usage,
            learning.charges,
            estimate=(res.cost.input_tokens if estimate is None else estimate)
            + round(res.repriced.get("tokens", 0.0)),
            count=count,
            known=learning.limits.burst_seconds is not None,
            output_adjusted=learning.output_adjusted if output_adjusted is None else output_adjusted,
        )
        now = self._clock.now()
        for name, delta in deltas.items():
            self._charge(res, name, delta, now)
        self.keep(res)

    def keep(self, res: Reservation) -> None:
        """Settle open `res` as charged now."""
        res.settled = True
        self._open.discard(res)
        self._counts["reconciled"] += 1

    def give_back(self, res: Reservation) -> None:
        """Settle open `res` by giving back all it holds (the provider never admitted it)."""
        now = self._clock.now()
        for name, amount in res.charged.items():
            if (dim := self._dims.get(name)) is not None:
                dim.correct(res.logged.get(name), -amount, now)
        if self.shared is not None:
            self.shared.give_back(res)
        res.settled = True
        self._open.discard(res)
        self._counts["refunded"] += 1

    def reprice(self) -> None:
        """The charge model learned from an answer: open reservations it now prices higher take
        what they are short at once, so nothing more is admitted into what they already used."""
        self._take_short(self._open.shortfalls(self._learning.charges))

    def raise_margin(self, dim: str, ratio: float) -> bool:
        """`dim`'s prompts are now believed charged `ratio` × more: open reservations are
        re-priced (their answers settle against that), answered ones' window entries scaled.
        True if anything changed."""
        if (d := self._dims.get(dim)) is None or ratio <= 1.0:
            return False
        skip = frozenset(id(r.logged.get(dim)) for r in self._open)
        self._take_short(self._open.raised(dim, ratio))
        d.window.scale(ratio, self._clock.now(), skip=skip)
        return True

    def _take_short(self, shortfalls: Iterator[tuple[Reservation, str, float]]) -> None:
        for res, name, short in shortfalls:
            self._charge(res, name, short, self._clock.now())
            res.repriced[name] = res.repriced.get(name, 0.0) + short

    def _charge(self, res: Reservation, name: str, delta: float, now: float) -> None:
        """`res` holds `delta` more of dimension `name` (less if negative), here and in a shared store."""
        if (dim := self._dims.get(name)) is not None:
            dim.correct(res.logged.get(name), delta, now)
        res.charged[name] += delta
        if self.shared is not None:
            self.shared.adjust(res, name, delta)
