"""Who a request is and what it owns: client keys (`keys`: a bearer token shown once, kept as its
SHA-256; `authenticate`), and the records of each owner's files and batches (`registry`) in the
server's own SQLite file `server.db` (`sqlite_file`: WAL, 0600); how often a key or an address
may do something (`rates`).

May import: `clock`, `errors` and what lies below them; never another server package (every other
server package imports it).
"""
