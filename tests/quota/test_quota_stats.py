"""`QuotaStats.in_use`: the share of each bucket taken, which the report, the live display and the
server's provider state show."""

from __future__ import annotations

from batchgate.quota.limits import QuotaStats


def _stats(levels: dict[str, float], capacities: dict[str, float]) -> QuotaStats:
    return QuotaStats(
        name="alpha",
        limits_per_minute={},
        effective_per_second={},
        levels=levels,
        capacities=capacities,
        waiters=0,
        paused_until=None,
        aimd_factor=1.0,
        cuts=0,
        rate_limited=0,
        admitted=0,
        refunded=0,
        reconciled=0,
        never_fit=0,
    )


def test_in_use_is_the_share_taken_per_dimension_clamped_and_rounded() -> None:
    stats = _stats(
        levels={"requests": 25.0, "input_tokens": -10.0, "output_tokens": 500.0},
        capacities={"requests": 100.0, "input_tokens": 1000.0, "output_tokens": 300.0},
    )
    assert stats.in_use() == {"requests": 0.75, "input_tokens": 1.0, "output_tokens": 0.0}


def test_a_dimension_without_capacity_is_left_out_and_a_missing_level_counts_as_full() -> None:
    stats = _stats(levels={"requests": 1.0 / 3.0}, capacities={"requests": 1.0, "tokens": 0.0, "other": 5.0})
    assert stats.in_use() == {"requests": 0.667, "other": 0.0}
