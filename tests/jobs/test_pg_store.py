"""What only the Postgres store has: migrations, schema checks, errors without secrets, and
several stores (as several worker processes would) sharing one schema."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest

from batchgate.errors import JobLockedError, StoreError
from batchgate.jobs.store.postgres import PgJobStore
from batchgate.jobs.store.postgres_schema import MIGRATIONS, SCHEMA_VERSION, Q
from batchgate.jobs.store.protocol import TaskState
from batchgate.jobs.store.sqlfile import split_statements
from pgutil import BASE_URL, fresh_schema

from .factories import job, outcome, specs

pytestmark = pytest.mark.postgres


def _apply(url: str, scripts: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for script in scripts:
            for statement in split_statements(script):
                conn.execute(statement)


def _shape(url: str) -> dict[str, Any]:
    """Columns, indexes and constraints of the URL's schema (its name taken out), and the version."""
    with psycopg.connect(url) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        assert schema is not None
        name = str(schema[0])
        columns = conn.execute(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default,"
            " is_identity FROM information_schema.columns WHERE table_schema = %s ORDER BY 1, 2",
            [name],
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, replace(indexdef, %s, 'S') FROM pg_indexes WHERE schemaname = %s ORDER BY 1",
            [name + ".", name],
        ).fetchall()
        constraints = conn.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE connamespace = %s::regnamespace ORDER BY 2",
            [name],
        ).fetchall()
        version = conn.execute("SELECT version FROM schema_version").fetchall()
    return {"columns": columns, "indexes": indexes, "constraints": constraints, "version": version}


def test_fresh_schema_equals_migrations_applied_in_order() -> None:
    with fresh_schema() as fresh, fresh_schema() as migrated:
        _apply(fresh, [Q["schema"]])
        _apply(migrated, MIGRATIONS)
        assert _shape(fresh) == _shape(migrated)
        assert _shape(fresh)["version"] == [(SCHEMA_VERSION,)]
        assert {"tasks", "leases"} <= {row[0] for row in _shape(fresh)["columns"]}


async def test_an_old_schema_is_migrated_on_open_and_keeps_its_jobs() -> None:
    with fresh_schema() as url:
        _apply(url, MIGRATIONS[:1])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs (job_id, input_path, input_sha256, output_path, config_path, status,"
                " created_at, updated_at, task_total, options) VALUES"
                " ('old', 'i', 'h', 'o', 'c', 'stopped', 1, 1, 0, '\\x7b7d')"
            )
        store = await PgJobStore.open(url)
        try:
            old = await store.get_job("old")
            assert old is not None
            assert old.status == "stopped"
            await store.add_tasks("old", specs(2))
            assert (
                await store.claim_chunk("old", 5, owner="w", lease_seconds=5) is not None
            )  # from migration 2
        finally:
            await store.close()
        assert _shape(url)["version"] == [(SCHEMA_VERSION,)]


async def test_foreign_and_newer_schemas_are_refused() -> None:
    with fresh_schema() as url:
        _apply(url, ["CREATE TABLE invoices (id INTEGER);"])
        with pytest.raises(StoreError, match="not a batchgate job store"):
            await PgJobStore.open(url)
    with fresh_schema() as url:
        _apply(url, [Q["schema"], "UPDATE schema_version SET version = 99;"])
        with pytest.raises(StoreError, match="newer batchgate"):
            await PgJobStore.open(url)


async def test_a_missing_schema_or_server_is_a_clear_error_without_the_password() -> None:
    with pytest.raises(StoreError, match="no schema to use"):
        await PgJobStore.open(BASE_URL + "?options=-csearch_path%3Dbg_no_such_schema")
    secret_url = "postgresql://postgres:hunter2secret@127.0.0.1:1/test?connect_timeout=2"
    with pytest.raises(StoreError, match="cannot reach") as caught:
        await PgJobStore.open(secret_url)
    assert "hunter2secret" not in str(caught.value)
    assert "postgresql://postgres@127.0.0.1:1/test" in str(caught.value)


async def test_reopening_keeps_everything() -> None:
    with fresh_schema() as url:
        store = await PgJobStore.open(url)
        await store.create_job(job())
        await store.add_tasks("job1", specs(3))
        await store.claim_tasks("job1", 2)
        await store.complete_tasks("job1", [outcome(1)])
        await store.put_blob("job1", "report", b"\x00\x01")
        await store.close()
        with pytest.raises(StoreError, match="closed"):
            await store.counts("job1")
        again = await PgJobStore.open(url)
        try:
            counts = await again.counts("job1")
            assert (counts[TaskState.SUCCEEDED], counts[TaskState.RUNNING]) == (1, 1)
            assert await again.get_blob("job1", "report") == b"\x00\x01"
        finally:
            await again.close()


async def test_several_stores_share_one_schema_like_worker_processes() -> None:
    """Separate pools (as separate machines would have) claim with SKIP LOCKED: no overlap,
    nothing lost; the job lock is exclusive across them and freed when its holder closes."""
    with fresh_schema() as url:
        stores = [await PgJobStore.open(url, max_connections=3) for _ in range(3)]
        try:
            await stores[0].create_job(job())
            await stores[0].add_tasks("job1", specs(500))
            claims = [
                stores[i % 3].claim_chunk("job1", 9, owner=f"w{i}", lease_seconds=60) for i in range(75)
            ]
            chunks = await asyncio.gather(*claims)
            seqs = sorted(t.seq for c in chunks if c is not None for t in c.tasks)
            assert seqs == sorted(set(seqs))
            assert len(seqs) == min(500, 9 * 75)
            first, second = stores[0], stores[1]
            with first.lock_job("job1"), pytest.raises(JobLockedError, match="job1"), second.lock_job("job1"):
                pass
            with stores[1].lock_job("job1"):
                pass
        finally:
            for s in stores:
                await s.close()


async def test_leases_run_on_the_servers_clock() -> None:
    with fresh_schema() as url:
        store = await PgJobStore.open(url, wall=lambda: 0.0)  # a wildly wrong local clock
        try:
            await store.create_job(job())
            await store.add_tasks("job1", specs(1))
            chunk = await store.claim_chunk("job1", 1, owner="w", lease_seconds=30)
            assert chunk is not None
            assert abs(chunk.expires_at - (time.time() + 30)) < 60
            assert await store.requeue_expired("job1") == 0
        finally:
            await store.close()
