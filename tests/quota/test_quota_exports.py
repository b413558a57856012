"""The quota package's public surface."""

from __future__ import annotations

from batchgate import quota


def test_exported_names() -> None:
    assert quota.__all__ == sorted(quota.__all__)
    assert set(quota.__all__) == {
        "DIMENSIONS",
        "QuotaLimits",
        "QuotaPool",
        "QuotaStats",
        "Reservation",
        "TokenBucket",
    }
    for name in quota.__all__:
        assert getattr(quota, name) is not None
