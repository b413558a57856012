"""Opening a Postgres job store: the location shown to users (never a password), the schema
checked and migrated, advisory-lock keys, and psycopg errors turned into `StoreError`s.

A schema that holds tables not batchgate's, or one made by a newer batchgate, is refused. A fresh
schema gets the `schema` block; an older one the `migration_NNNN` blocks it lacks, in order, in one
transaction under an advisory lock, so workers opening one store together migrate it once.
Errors are classified by psycopg's exception type, never by message text.
"""

from __future__ import annotations

import hashlib

import psycopg

from batchgate.errors import StoreError
from batchgate.jobs.store.sqlfile import migrations, queries, split_statements

QUERIES_FILE = "postgres_queries.sql"
Q = queries(QUERIES_FILE)
MIGRATIONS = migrations(Q)
SCHEMA_VERSION = len(MIGRATIONS)


def lock_key(schema: str, name: str) -> int:
    """A signed 64-bit advisory-lock key for `name` within this store's schema."""
    digest = hashlib.blake2b(f"batchgate\0{schema}\0{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def store_error(where: str, exc: psycopg.Error) -> StoreError:
    """Classify by psycopg's exception type (its SQLSTATE class), never by message text."""
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StoreError(f"{where}: no permission to use the job store (SQLSTATE {exc.sqlstate})")
    if isinstance(exc, psycopg.OperationalError):
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreError(f"{where}: cannot reach the Postgres job store ({detail})")
    return StoreError(f"{where}: job store error ({type(exc).__name__}, SQLSTATE {exc.sqlstate})")


async def prepare(conn: psycopg.AsyncConnection[tuple[object, ...]], where: str) -> str:
    """Check and migrate the schema the connection's search_path selects; returns its name."""
    schema = (await (await conn.execute(Q["current_schema"])).fetchone() or (None,))[0]
    if not isinstance(schema, str):
        raise StoreError(f"{where}: no schema to use (the search_path names none that exists)")
    async with conn.transaction():
        await conn.execute(Q["migrate_lock"], {"key": lock_key(schema, "migrate")})
        tables = {row[0] for row in await (await conn.execute(Q["list_tables"])).fetchall()}
        if tables and not {"schema_version", "jobs"} <= tables:
            raise StoreError(f"{where}: schema {schema!r} is not a batchgate job store (it has other tables)")
        version = -1
        if tables:
            row = await (await conn.execute(Q["get_schema_version"])).fetchone()
            version = int(str(row[0] or 0)) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{where}: made by a newer batchgate (schema {version}; this one knows {SCHEMA_VERSION})"
            )
        for script in [Q["schema"]] if version < 0 else MIGRATIONS[version:]:
            for statement in split_statements(script):
                await conn.execute(statement)
    return schema
