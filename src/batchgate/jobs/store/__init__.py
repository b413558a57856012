"""The job store seam: the `JobStore` protocol (chunk leases included) and its implementations
(in-memory; SQLite with the named queries in `queries.sql`; Postgres with those in
`postgres_queries.sql`, needing the `postgres` extra), `location` choosing one from a path or a
URL, plus the lock file that keeps one process per job on SQLite.

May import: the core (`errors`, `clock`, `models`) and `config` (the job spec a job remembers).
Nothing else of `jobs`; the rest of `jobs`
reaches the store only through `protocol.JobStore`.
"""
