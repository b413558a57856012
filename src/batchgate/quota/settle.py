"""What settling a reservation with the provider's usage changes, per dimension (pure).

Providers charge the prompt estimate + max_tokens at admission; most keep that charge, so only the
prompt part is corrected (`reconcile_targets`); one that adjusts the output charge to the real
output when the answer ends (`output_adjusted`: Anthropic's OTPM) has the unused output given back
in full, whatever is known of its enforcement. An under-estimate is taken at once. An
over-estimate is given back in full where the enforcement is known (a configured burst); elsewhere
only as far as the charge model, as it stands now, would still over-reserve that prompt
(`estimate_credit`): the noise of one estimate, which under-estimates taken elsewhere balance.
What a reservation held because the model has since learned a lower charge is not given back:
late credit from a whole run of stale reservations would let a burst into one window.
"""

from __future__ import annotations

from batchgate.models import Usage
from batchgate.quota.charge import ChargeModel
from batchgate.quota.limits import Reservation


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
    credit = None if known else estimate_credit(charges, usage, count)
    if credit is not None and output_adjusted:  # the provider gave the unused output back: so do we
        unused = float(max(0, res.cost.output_tokens - usage.completion_tokens))
        credit["output_tokens"] = unused
        credit["tokens"] = credit.get("tokens", 0.0) + unused
    deltas: dict[str, float] = {}
    for name, amount in target.items():
        delta = max(0.0, amount) - res.charged[name]
        if delta < 0 and credit is not None:
            delta = -min(-delta, credit.get(name, 0.0))
        deltas[name] = delta
    return deltas


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
