"""Quota: token buckets mirroring the providers' admission rule, the per-key quota pool, and the
quota stores (`quota.store`) through which processes share a key's quota (`quota.shared`).

May import: `policy` and the core (`models`, `clock`, `errors`).
"""

from batchgate.quota.bucket import TokenBucket
from batchgate.quota.limits import DIMENSIONS, QuotaLimits, QuotaStats, Reservation
from batchgate.quota.pool import QuotaPool

__all__ = ["DIMENSIONS", "QuotaLimits", "QuotaPool", "QuotaStats", "Reservation", "TokenBucket"]
