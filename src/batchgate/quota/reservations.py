"""A quota pool's reservations from admission until settled: what each holds on each dimension.

A reservation is charged on every limited dimension at admission (the pool's `_admit`); from then
on `Reservations` keeps its charges true, here and in a shared store, until exactly one of these
settles it: corrected with the provider's real usage when its answer comes (`reconcile`), given
back when the provider never admitted it (`give_back`), or kept as charged (`keep`). The book
never wakes the pool's queue: the pool does, after calling it.

Repricing. A request is reserved at what the charge model says when it is admitted. Before the
first answers — or before a rise in what the provider charges per unit of our count was learned
— that can fall short of what the provider charged it at admission. Each reservation is corrected
when its own answer comes in, one latency later; until then the pool would keep admitting into
windows the provider has already filled with the difference, and draw 429s that look like a rate
problem. So when the usage ratio rises by `RISE` (`reprice`), or a charge margin is raised by 429s
(`raise_margin`), every open reservation takes what it is short by at once
(`Reservation.repriced` remembers it for the reconcile).

Settling with the provider's usage (`reconcile_deltas`, pure). Providers charge the prompt
estimate + max_tokens at admission; most keep that charge, so only the prompt part is corrected
(`reconcile_targets`); one that adjusts the output charge to the real output when the answer ends
(`output_adjusted`: Anthropic's OTPM) has the unused output given back in full, whatever is known
of its enforcement. An under-estimate is taken at once. An over-estimate is given back in full
where the enforcement is known (a configured burst); elsewhere only as far as the charge model, as
it stands now, would still over-reserve that prompt (`estimate_credit`): the noise of one
estimate, which under-estimates taken elsewhere balance. What a reservation held because the
model has since learned a lower charge is not given back: late credit from a whole run of stale
reservations would let a burst into one window.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from batchgate.clock import Clock
from batchgate.models import Usage
from batchgate.quota.charge import PROMPT_DIMENSIONS, ChargeModel
from batchgate.quota.dimension import Dimension
from batchgate.quota.learning import Learning
from batchgate.quota.limits import Reservation
from batchgate.quota.shared import SharedQuota

RISE = 0.02  # a usage ratio this much above the one last seen makes the open reservations short


class Reservations:
    """The book of one pool's reservations; see the module docstring."""

    __slots__ = ("_clock", "_counts", "_dims", "_learning", "_open", "_ratio", "name", "shared")

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
        self._open: dict[Reservation, int] = {}  # the open ones priced from our count: that count
        self._ratio = 1.0  # the usage ratio they were last priced at (1: our count)
        self.shared: SharedQuota | None = None  # the key's shared quota, if the pool shares it

    def add(self, res: Reservation, count: int | None) -> None:
        """`res` was just admitted, priced from our prompt `count` (None: not counted)."""
        self._counts["open"] += 1
        self._learning.output_hold.admitted(res)
        if count is not None and count > 0:
            self._open[res] = count

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
        now: float | None = None,
    ) -> None:
        """Correct open `res` with the provider's real `usage` and settle it: what is corrected and
        why, `reconcile_deltas` (`estimate`: of its prompt, default `res.cost.input_tokens`;
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
        now = self._clock.now() if now is None else now
        for name, delta in deltas.items():
            if delta:  # (nothing to correct, here or in a shared store)
                self._charge(res, name, delta, now)
        self.keep(res)
        if self.shared is not None:  # a deeper output bucket learned from the last answer's report
            self.shared.credit("output_tokens", learning.output_hold.take_credit())

    def keep(self, res: Reservation, *, answered: bool = True) -> None:
        """Settle open `res` as charged now (`answered`: with its answer's usage: counted as
        reconciled; else abandoned or its cost unknown)."""
        self._close(res)
        self._counts["reconciled"] += answered

    def give_back(self, res: Reservation) -> None:
        """Settle open `res` by giving back all it holds (the provider never admitted it)."""
        now = self._clock.now()
        for name, amount in res.charged.items():
            if (dim := self._dims.get(name)) is not None:
                dim.correct(res.logged.get(name), -amount, now)
        if self.shared is not None:
            self.shared.give_back(res)
        self._close(res)
        self._counts["refunded"] += 1

    def _close(self, res: Reservation) -> None:
        """`res` is settled: no longer open (nor waiting to be sent)."""
        res.settled = True
        self._open.pop(res, None)
        self._counts["open"] -= 1
        self._learning.output_hold.sent(res)

    def reprice(self) -> None:
        """The charge model learned from an answer: open reservations it now prices higher take
        what they are short at once, so nothing more is admitted into what they already used."""
        self._take_short(self._shortfalls(self._learning.charges))

    def raise_margin(self, dim: str, ratio: float) -> bool:
        """`dim`'s prompts are now believed charged `ratio` × more: open reservations are
        re-priced (their answers settle against that), answered ones' window entries scaled.
        True if anything changed."""
        if (d := self._dims.get(dim)) is None or ratio <= 1.0:
            return False
        skip = frozenset(id(r.logged.get(dim)) for r in self._open)
        self._take_short(self._raised(dim, ratio))
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

    def _raised(self, dim: str, ratio: float) -> Iterator[tuple[Reservation, str, float]]:
        """(reservation, `dim`, units short) for every open reservation once `dim`'s prompts are
        believed charged `ratio` × what they were priced at (a margin raised by 429s)."""
        for res in self._open:
            if dim in res.charged:
                yield res, dim, _prompt_held(res, dim) * (ratio - 1.0)

    def _shortfalls(self, charges: ChargeModel) -> Iterator[tuple[Reservation, str, float]]:
        """(reservation, dimension, units short) for every open reservation the model now prices
        higher — only when the usage ratio rose by `RISE` since the last call (a margin raised by
        429s: `_raised`)."""
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


def reconcile_deltas(
    res: Reservation,
    usage: Usage,
    charges: ChargeModel,
    *,
    estimate: int,
    count: int | None,
    known: bool,
    output_adjusted: bool,
) -> dict[str, float]:
    """How much more (or, negative, less) `res` should hold on each dimension it charged, given
    its answer's `usage`: `estimate` is the prompt it was reserved at (its repricing included),
    `count` our own count of that prompt, `known` whether the enforcement is configured."""
    target = reconcile_targets(res, usage, charges, estimate, count, output_adjusted=output_adjusted)
    credit: dict[str, float] | None = None  # worked out at the first delta that gives back
    deltas: dict[str, float] = {}
    for name, amount in target.items():
        delta = max(0.0, amount) - res.charged[name]
        if delta < 0 and not known:
            if credit is None:
                credit = _credit(res, usage, charges, count, output_adjusted=output_adjusted)
            delta = -min(-delta, credit.get(name, 0.0))
        deltas[name] = delta
    return deltas


def _credit(
    res: Reservation, usage: Usage, charges: ChargeModel, count: int | None, *, output_adjusted: bool
) -> dict[str, float]:
    """What `res` may give back on each dimension (`estimate_credit`; with `output_adjusted`, the
    provider gave the unused output back: so do we)."""
    credit = estimate_credit(charges, usage, count)
    if output_adjusted:
        unused = float(max(0, res.cost.output_tokens - usage.completion_tokens))
        credit["output_tokens"] = unused
        credit["tokens"] = credit.get("tokens", 0.0) + unused
    return credit


def reconcile_targets(
    res: Reservation,
    usage: Usage,
    charges: ChargeModel,
    estimate: int,
    count: int | None = None,
    *,
    output_adjusted: bool,
) -> dict[str, float]:
    """What `res` should have charged on each dimension the provider corrects after the fact.

    Providers charge the prompt estimate + max_tokens at admission and keep that charge, so only
    the prompt part is corrected: on `tokens` by charged − `estimate`d prompt tokens (none when
    the estimate is 0), on `input_tokens` to the charged uncached prompt tokens; "charged" is the
    reported count as the charge model says this provider charges it. With `output_adjusted` (a
    provider that refunds unused max_tokens, as Anthropic documents for OTPM) `output_tokens` is
    corrected to the real completion tokens too, and `tokens` by the output it did not use.
    """
    target: dict[str, float] = {}
    charged = charges.charged
    uncached = max(0, usage.prompt_tokens - usage.cached_tokens)
    if "tokens" in res.charged and (estimate > 0 or output_adjusted):
        tokens = res.charged["tokens"]
        if estimate > 0:
            tokens += charged("tokens", usage.prompt_tokens, count) - estimate
        if output_adjusted:
            tokens += usage.completion_tokens - res.cost.output_tokens
        target["tokens"] = tokens
    if "input_tokens" in res.charged:
        target["input_tokens"] = float(charged("input_tokens", uncached, _uncached_count(usage, count)))
    if "output_tokens" in res.charged and output_adjusted:
        target["output_tokens"] = float(usage.completion_tokens)
    return target


def estimate_credit(charges: ChargeModel, usage: Usage, count: int | None) -> dict[str, float]:
    """How much of a prompt's reservation may be given back on each prompt dimension: what the
    charge model, as it stands now, would reserve for our `count` of it, less what it was
    charged — the noise of one estimate, never a change the model has learned since (none
    without `count`)."""
    if count is None or count <= 0:
        return {}
    uncached = max(0, usage.prompt_tokens - usage.cached_tokens)
    tokens = charges.reserve("tokens", count) - charges.charged("tokens", usage.prompt_tokens, count)
    inputs = charges.reserve("input_tokens", count) - charges.charged(
        "input_tokens", uncached, _uncached_count(usage, count)
    )
    return {"tokens": float(max(0, tokens)), "input_tokens": float(max(0, inputs))}


def _uncached_count(usage: Usage, count: int | None) -> int | None:
    """Our `count` of a prompt scaled to the share the provider did not serve from its cache."""
    if count is None or usage.prompt_tokens <= 0 or usage.cached_tokens <= 0:
        return count
    return round(count * max(0, usage.prompt_tokens - usage.cached_tokens) / usage.prompt_tokens)


def _prompt_held(res: Reservation, dim: str) -> float:
    """What `res` holds on `dim` for its prompt (on `tokens`, less its max_tokens)."""
    return res.charged[dim] - (res.cost.output_tokens if dim == "tokens" else 0.0)
