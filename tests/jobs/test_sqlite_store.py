"""What only the SQLite store has: named queries, migrations, file checks, permissions, flocks."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from batchgate.errors import JobLockedError, StoreError
from batchgate.jobs.store.lockfile import JobLockFile, lock_path_for
from batchgate.jobs.store.protocol import TaskState
from batchgate.jobs.store.schema import SCHEMA_VERSION, connect
from batchgate.jobs.store.sqlfile import migrations, parse_queries, queries, split_statements
from batchgate.jobs.store.sqlite import SqliteJobStore

from .factories import job, outcome, specs


def test_parse_queries_splits_named_blocks() -> None:
    text = "-- a comment before any block\n-- first --\nSELECT 1;\n\n-- second_2 --\nSELECT\n  2;\n"
    assert parse_queries(text) == {"first": "SELECT 1;", "second_2": "SELECT\n  2;"}
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- a --\nSELECT 1;\n-- a --\nSELECT 2;\n")


def test_every_block_is_complete_sql() -> None:
    named = queries()
    assert {"schema", "task_claim", "task_complete", "results_by_seq"} <= set(named)
    for name, sql in named.items():
        assert split_statements(sql), name


def test_migrations_must_be_numbered_without_gaps() -> None:
    assert migrations({"migration_0002": "B", "migration_0001": "A", "other": "C"}) == ["A", "B"]
    with pytest.raises(ValueError, match="without gaps"):
        migrations({"migration_0001": "A", "migration_0003": "C"})


def _shape(conn: sqlite3.Connection) -> dict[str, object]:
    """Tables with their columns, indexes with their columns, and the schema version."""
    shape: dict[str, object] = {}
    objects = conn.execute("SELECT type, name, tbl_name FROM sqlite_master ORDER BY name").fetchall()
    for kind, name, table in objects:
        if kind == "table":
            shape[name] = conn.execute(f"PRAGMA table_xinfo({name})").fetchall()
        elif kind == "index":
            shape[name] = (table, conn.execute(f"PRAGMA index_xinfo({name})").fetchall())
    shape["version"] = conn.execute("SELECT version FROM schema_version").fetchall()
    return shape


def test_fresh_schema_equals_migrations_applied_in_order(tmp_path: Path) -> None:
    named = queries()
    fresh = sqlite3.connect(tmp_path / "fresh.db")
    fresh.executescript(named["schema"])
    migrated = sqlite3.connect(tmp_path / "migrated.db")
    for script in migrations(named):
        migrated.executescript(script)
    assert _shape(fresh) == _shape(migrated)
    assert _shape(fresh)["version"] == [(SCHEMA_VERSION,)]


async def test_an_old_database_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(migrations(queries())[0])
    conn.close()
    store = await SqliteJobStore.open(path)
    await store.create_job(job())
    await store.put_blob("job1", "k", b"v")  # the blobs table came with migration 2
    await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


async def test_reopen_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store = await SqliteJobStore.open(path)
    await store.create_job(job())
    await store.add_tasks("job1", specs(4))
    await store.claim_tasks("job1", 3)
    await store.complete_tasks("job1", [outcome(1)])
    await store.put_blob("job1", "stats", b"{}")
    await store.close()
    await store.close()  # idempotent

    store = await SqliteJobStore.open(path)
    try:
        assert await store.get_job("job1") == job()
        counts = await store.counts("job1")
        assert counts == {
            TaskState.PENDING: 1,
            TaskState.RUNNING: 2,
            TaskState.SUCCEEDED: 1,
            TaskState.FAILED: 0,
        }
        assert await store.requeue_running("job1") == 2
        assert [t.seq for t in await store.claim_tasks("job1", 10)] == [0, 2, 3]
        assert await store.get_blob("job1", "stats") == b"{}"
    finally:
        await store.close()


async def test_a_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = await SqliteJobStore.open(tmp_path / "jobs.db")
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.list_jobs()


async def _make_db_and_lock(path: Path) -> int:
    """The lock file's mode while held (it is removed when let go)."""
    store = await SqliteJobStore.open(path)
    await store.create_job(job())
    lock = lock_path_for(path, "job1")
    with store.lock_job("job1"):
        mode = stat.S_IMODE(lock.stat().st_mode)
    assert not lock.exists()
    await store.close()
    return mode


def test_files_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        lock_mode = asyncio.run(_make_db_and_lock(tmp_path / "jobs.db"))
    finally:
        os.umask(old)
    assert lock_mode == 0o600
    made = [p for p in tmp_path.iterdir() if p.name.startswith("jobs.db")]
    assert tmp_path / "jobs.db" in made
    for p in made:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


async def test_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n")
    with pytest.raises(StoreError, match=r"notes\.db.*not a batchgate job database"):
        await SqliteJobStore.open(path)
    assert path.read_text() == "these are my notes, not a database\n"


async def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"other\.db.*other tables"):
        await SqliteJobStore.open(path)


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    await (await SqliteJobStore.open(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 5,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer batchgate"):
        await SqliteJobStore.open(path)


async def test_corrupted_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store = await SqliteJobStore.open(path)
    await store.create_job(job())
    await store.add_tasks("job1", specs(300))
    await store.close()
    data = bytearray(path.read_bytes())
    data[100 : len(data)] = b"\xa5" * (len(data) - 100)  # keep the header, ruin every page
    path.write_bytes(bytes(data))
    for name in ("jobs.db-wal", "jobs.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    with pytest.raises(StoreError, match=r"jobs\.db.*corrupted"):
        await _open_and_count(path)


async def _open_and_count(path: Path) -> None:
    store = await SqliteJobStore.open(path)
    try:
        await store.counts("job1")
    finally:
        await store.close()


def test_a_busy_database_is_a_clear_store_error(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match=r"jobs\.db.*locked by another process"):
            connect(path, 0.05)
    finally:
        blocker.rollback()
        blocker.close()


async def test_a_directory_or_a_missing_parent_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="directory"):
        await SqliteJobStore.open(tmp_path)
    with pytest.raises(StoreError, match=r"nowhere/jobs\.db: cannot open the job database"):
        await SqliteJobStore.open(tmp_path / "nowhere" / "jobs.db")


async def test_lock_is_released_on_close_and_shared_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    first = await SqliteJobStore.open(path)
    second = await SqliteJobStore.open(path)
    try:
        held = first.lock_job("job1")
        held.__enter__()
        with pytest.raises(JobLockedError, match=rf"'job1'.*pid {os.getpid()}"), second.lock_job("job1"):
            pass
        await first.close()
        with second.lock_job("job1"):
            pass
    finally:
        await second.close()


def test_odd_job_ids_get_safe_lock_file_names(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    assert lock_path_for(db, "nightly-2024.1").name == "jobs.db.nightly-2024.1.lock"
    odd = lock_path_for(db, "../../etc/passwd")
    assert odd.parent == tmp_path
    assert "/" not in odd.name.removeprefix("jobs.db.")


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys, time
    from batchgate.jobs.store.sqlite import SqliteJobStore

    async def main() -> None:
        store = await SqliteJobStore.open(sys.argv[1])
        with store.lock_job("job1"):
            print("locked", flush=True)
            time.sleep(120)

    asyncio.run(main())
    """
)


async def _try_lock(path: Path, locked_by: int | None) -> None:
    store = await SqliteJobStore.open(path)
    try:
        if locked_by is None:
            with store.lock_job("job1"):
                pass
        else:
            with pytest.raises(JobLockedError, match=rf"'job1'.*pid {locked_by}"), store.lock_job("job1"):
                pass
    finally:
        await store.close()


def test_lock_is_freed_when_the_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        asyncio.run(_try_lock(path, locked_by=holder.pid))
        holder.kill()  # SIGKILL: no cleanup runs in the holder
        holder.wait(timeout=30)
        asyncio.run(_try_lock(path, locked_by=None))
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_lock_file_left_by_a_holder_is_not_trusted_after_it_is_removed(tmp_path: Path) -> None:
    """A waiter that opened the lock file before its holder removed it must not hold a lock on
    the unlinked file while a third run locks a fresh one under the same name."""
    path = lock_path_for(tmp_path / "jobs.db", "job1")
    first = JobLockFile(path, "job1")
    first.acquire()
    stale = os.open(path, os.O_RDWR)  # a second opener, before the holder lets go
    first.release()
    assert not path.exists()
    second = JobLockFile(path, "job1")
    second.acquire()
    try:
        third = JobLockFile(path, "job1")
        with pytest.raises(JobLockedError):
            third.acquire()
    finally:
        second.release()
        os.close(stale)


async def _another_process_writes_and_closes(path: Path) -> None:
    """What `batchgate cancel` does to the file: open it, write, close it."""
    code = (
        f"import sqlite3; c = sqlite3.connect({str(path)!r}); "
        "c.execute('DELETE FROM blobs WHERE 0'); c.close()"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
    assert await proc.wait() == 0


async def test_a_second_open_in_the_process_keeps_the_first_connection_s_locks(tmp_path: Path) -> None:
    """A server opens the store once per job; another process (`batchgate cancel`) closing the
    file must not take the WAL away from the server's first connection (it was a disk I/O error)."""
    path = tmp_path / "jobs.db"
    first = await SqliteJobStore.open(path)
    try:
        await first.create_job(job())
        await first.put_blob("job1", "k", b"v")
        await (await SqliteJobStore.open(path)).close()  # a job's own open and close
        await _another_process_writes_and_closes(path)
        await first.put_blob("job1", "k2", b"v2")
        later = await SqliteJobStore.open(path)  # the next job
        try:
            await later.put_blob("job1", "k3", b"v3")
            assert await later.get_blob("job1", "k2") == b"v2"
        finally:
            await later.close()
        assert await first.get_blob("job1", "k") == b"v"
        assert await first.get_blob("job1", "k3") == b"v3"
    finally:
        await first.close()
