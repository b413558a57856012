"""Quota: token buckets mirroring the providers' admission rule, and the per-key quota pool.

May import: `policy` and the core (`models`, `clock`, `errors`).
"""

from batchgate.quota.bucket import TokenBucket
from batchgate.quota.limits import DIMENSIONS, QuotaLimits, QuotaStats, Reservation
from batchgate.quota.pool import QuotaPool

__all__ = ["DIMENSIONS", "QuotaLimits", "QuotaPool", "QuotaStats", "Reservation", "TokenBucket"]
