"""The test Postgres: where it is, a fresh schema per test, and skipping (or failing under CI).

Every test that needs Postgres gets its own schema, named at random and dropped afterwards, and a
URL whose search_path selects it, so tests (and parallel runs) never see each other's rows. Where
no server answers, such tests skip with the reason; under `CI=true` they fail instead, so CI
cannot pass without having run them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import psycopg
import pytest

BASE_URL = os.environ.get("BATCHGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@cache
def _unreachable_reason() -> str | None:
    try:
        with psycopg.connect(BASE_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"no Postgres at {BASE_URL} ({type(exc).__name__}); start it or set BATCHGATE_TEST_POSTGRES"
    return None


def require_postgres() -> None:
    """Skip the calling test where Postgres is absent; fail it under CI, where it must be there."""
    reason = _unreachable_reason()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def schema_url(schema: str) -> str:
    """BASE_URL with a search_path that selects `schema`."""
    sep = "&" if "?" in BASE_URL else "?"
    return f"{BASE_URL}{sep}options=-csearch_path%3D{schema}"


@contextmanager
def fresh_schema(prefix: str = "bgtest") -> Iterator[str]:
    """Create an empty schema, yield a URL that uses it, and drop it with everything in it."""
    require_postgres()
    schema = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # the name is ours: letters, digits, underscores
    try:
        yield schema_url(schema)
    finally:
        with psycopg.connect(BASE_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
