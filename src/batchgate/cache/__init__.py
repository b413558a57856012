"""The response cache: an answer paid for once is never paid for again (issue 43).

`key` makes a request's cache key (provider kind, model, endpoint and the canonical body, batchgate's
own fields removed) and says whether a request is deterministic enough to reuse; `entry` is what an
entry holds (the answer's body, usage, cost); `protocol` is the `CacheStore` seam, with its memory,
SQLite (`sqlite_store`: one file, WAL, bounded, LRU) and Redis (`redis_store`) implementations, one
conformance suite for all three (`tests/cache/test_cache_store_conformance.py`); `location` opens a
store from a path or a `redis://` URL.

May import: `batchgate.clock`, `batchgate.errors`, `batchgate.endpoints`, `batchgate.request_fields`,
`batchgate.urls`.
"""
