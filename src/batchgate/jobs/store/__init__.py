"""The job store seam: the `JobStore` protocol and its implementations (in-memory, SQLite with the
named queries in `queries.sql`), plus the lock file that keeps one process per job.

May import: the core (`errors`, `clock`, `models`). Nothing else of `jobs`; the rest of `jobs`
reaches the store only through `protocol.JobStore`.
"""
