"""Open reservations priced before the charge model learned a higher charge: what each is short.

A request is reserved at what the charge model says when it is admitted. Before the first answers
— or before a rise in what the provider charges per unit of our count was learned — that can fall
short of what the provider charged it at admission. Each reservation is corrected when its own
answer comes in, one latency later; until then the pool would keep admitting into windows the
provider has already filled with the difference, and draw 429s that look like a rate problem. So
when the usage ratio rises, `OpenReservations.shortfalls` names what every open reservation is
short by now, and the pool takes it at once (`Reservation.repriced` remembers it for the
reconcile). Pure: the pool owns the buckets.
"""

from __future__ import annotations

from collections.abc import Iterator

from batchgate.quota.charge import PROMPT_DIMENSIONS, ChargeModel
from batchgate.quota.limits import Reservation

RISE = 0.02  # a usage ratio this much above the one last seen makes the open reservations short


class OpenReservations:
    """The open reservations of one pool that carry our prompt count; see the module docstring."""

    __slots__ = ("_open", "_ratio")

    def __init__(self) -> None:
        self._open: dict[Reservation, int] = {}
        self._ratio = 1.0  # the usage ratio open reservations were last priced at (1: our count)

    def add(self, res: Reservation, count: int | None) -> None:
        if count is not None and count > 0:
            self._open[res] = count

    def __iter__(self) -> Iterator[Reservation]:
        return iter(self._open)

    def discard(self, res: Reservation) -> None:
        self._open.pop(res, None)

    def raised(self, dim: str, ratio: float) -> Iterator[tuple[Reservation, str, float]]:
        """(reservation, `dim`, units short) for every open reservation once `dim`'s prompts are
        believed charged `ratio` × what they were priced at (a margin raised by 429s)."""
        for res in self._open:
            if dim in res.charged:
                yield res, dim, _prompt_held(res, dim) * (ratio - 1.0)

    def shortfalls(self, charges: ChargeModel) -> Iterator[tuple[Reservation, str, float]]:
        """(reservation, dimension, units short) for every open reservation the model now prices
        higher — only when the usage ratio rose by `RISE` since the last call (a margin raised by
        429s: `raised`)."""
        ratio = charges.usage_ratio
        rose = ratio > self._ratio * (1.0 + RISE)
        self._ratio = ratio
        if not rose:
            return
        for res, count in self._open.items():
            for dim in PROMPT_DIMENSIONS:
                if dim not in res.charged:
                    continue
                short = charges.reserve(dim, count) - _prompt_held(res, dim)
                if short > 0:
                    yield res, dim, float(short)


def _prompt_held(res: Reservation, dim: str) -> float:
    """What `res` holds on `dim` for its prompt (on `tokens`, less its max_tokens)."""
    return res.charged[dim] - (res.cost.output_tokens if dim == "tokens" else 0.0)
