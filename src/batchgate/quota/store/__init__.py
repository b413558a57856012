"""Quota stores: where the buckets of a provider key live when several processes share them.

One Protocol (`protocol.QuotaStore`), one atomic operation (`apply`), three implementations that
pass one conformance suite (tests/quota/test_quota_store_conformance.py): `memory` (this process),
`sqlite` (this machine: a ledger file under the user's cache directory) and `redis` (any number
of machines; a Lua script run by the server, on the server's clock). `location` parses a store's
name (`memory`, `local`, `sqlite:PATH`, `redis://…`) and opens it, importing redis only when asked.

May import: `batchgate.quota.bucket`/`limits` and the core (`clock`, `errors`); the standard
library; `redis` (only inside `redis_store`, loaded lazily by `location`).
"""

from batchgate.quota.store.protocol import Pace, QuotaStore, Settle, quota_id

__all__ = ["Pace", "QuotaStore", "Settle", "quota_id"]
