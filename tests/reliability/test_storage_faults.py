"""Storage faults: a read-only output directory, a job database that is random bytes, corrupted
or another application's, a database locked by another connection, and a full disk. Each gives a
clear one-line error and a non-zero exit with no traceback, leaves the files as they were, and
the job completes once the fault is gone."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from acceptance.harness import Cli, one_error_line, read_jsonl
from batchgate.emulator import EmulatorThread

from .helpers import (
    check_store_consistent,
    emu_provider,
    gw_provider,
    start_emulator,
    write_config,
    write_input,
)

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorThread]:
    thread = start_emulator([emu_provider("alpha", latency_ms=5)])
    try:
        yield thread
    finally:
        thread.stop()


@contextlib.contextmanager
def tmpfs(directory: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(directory)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode(errors='replace').strip()})")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


def _args(cli: Cli, emu: EmulatorThread, n: int, out: Path) -> list[str]:
    src = write_input(cli.cwd / "in.jsonl", n)
    cfg = write_config(cli.cwd / "gw.yaml", [gw_provider(emu, "alpha")], concurrency=8)
    return ["run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet"]


def _complete(out: Path, n: int) -> None:
    ids = [row["custom_id"] for row in read_jsonl(out)]
    assert sorted(ids) == [f"item-{i:05d}" for i in range(n)]


def test_read_only_output_directory(cli: Cli, emu: EmulatorThread, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "64k", read_only=True) as ro:
        done = cli.run(*_args(cli, emu, 5, ro / "out.jsonl"))
        assert done.returncode == 2
        line = one_error_line(done.stderr)
        assert str(ro) in line
    assert not cli.store.exists() or check_store_consistent(cli, 5)


@pytest.mark.parametrize(
    "kind",
    [
        "random_bytes",
        "sqlite_magic_then_garbage",
        "foreign_sqlite",
        "empty_dir",
    ],
)
def test_a_database_that_is_not_ours_is_refused_untouched(
    cli: Cli, emu: EmulatorThread, tmp_path: Path, kind: str
) -> None:
    cli.store.parent.mkdir(mode=0o700)
    if kind == "random_bytes":
        cli.store.write_bytes(os.urandom(8192))
    elif kind == "sqlite_magic_then_garbage":
        cli.store.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    elif kind == "foreign_sqlite":
        conn = sqlite3.connect(cli.store)
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
        conn.execute("INSERT INTO users (email) VALUES ('a@example.com')")
        conn.commit()
        conn.close()
    else:
        cli.store.mkdir()
    before = b"" if cli.store.is_dir() else cli.store.read_bytes()
    out = cli.cwd / "out.jsonl"
    args = _args(cli, emu, 5, out)
    for command in (args, ["status", "--json"], ["jobs"]):
        done = cli.run(*command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        line = one_error_line(done.stderr)
        assert str(cli.store) in line
    assert (b"" if cli.store.is_dir() else cli.store.read_bytes()) == before
    assert not out.exists()
    # with a store of its own the same job runs
    cli.store = tmp_path / "fresh" / "jobs.db"
    done = cli.run(*args)
    assert done.returncode == 0, done.stderr
    _complete(out, 5)


def test_a_locked_database_is_a_clear_error_then_resumable(cli: Cli, emu: EmulatorThread) -> None:
    n = 20
    out = cli.cwd / "out.jsonl"
    args = _args(cli, emu, n, out)
    # create the store (and the job) with a run that is refused for an unrelated reason
    first = cli.run(*args)
    assert first.returncode == 0, first.stderr
    out.unlink()
    holder = sqlite3.connect(cli.store, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("UPDATE jobs SET status = status")
        src2 = write_input(cli.cwd / "in2.jsonl", n, tag="second ")
        out2 = cli.cwd / "out2.jsonl"
        args2 = [args[0], str(src2), *args[2:5], str(out2), *args[6:]]
        done = cli.run(*args2)
        assert done.returncode == 2, done.stderr
        line = one_error_line(done.stderr)
        assert "locked" in line
        assert str(cli.store) in line
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    integrity = sqlite3.connect(cli.store).execute("PRAGMA integrity_check").fetchone()
    assert integrity == ("ok",)
    done = cli.run(*args2)
    assert done.returncode == 0, done.stderr
    _complete(out2, n)


def _fill(directory: Path, leave: int) -> Path:
    """Fill the file system up, then give back `leave` bytes."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))
    return filler


def test_disk_full_while_loading_tasks_then_resume(cli: Cli, emu: EmulatorThread, tmp_path: Path) -> None:
    n = 300
    with tmpfs(tmp_path / "small", "4m") as small:
        cli.store = small / "store" / "jobs.db"
        out = small / "out.jsonl"
        args = _args(cli, emu, n, out)
        filler = small / "filler"
        filler.write_bytes(b"\0" * (4006 * 1024))  # ~90 KB left: not enough for the tasks
        done = cli.run(*args)
        assert done.returncode == 2, done.stdout
        assert "disk is full" in one_error_line(done.stderr)
        filler.unlink()
        done = cli.run(*args)
        assert done.returncode == 0, done.stderr
        _complete(out, n)


def test_disk_full_while_running_then_resume(cli: Cli, emu: EmulatorThread, tmp_path: Path) -> None:
    n = 300
    # 4 MB: room for the store, its write-ahead log (which the disk-full run leaves grown) and the
    # outputs once the filler is gone; the filler leaves only 24 KB while the second run sends
    with tmpfs(tmp_path / "small", "4m") as small:
        cli.store = small / "store" / "jobs.db"
        out = small / "out.jsonl"
        args = _args(cli, emu, n, out)
        # store the job and its tasks, stopped almost at once: a config whose provider is
        # unreachable, with an error-rate stop after the first failure
        dead = write_config(
            cli.cwd / "dead.yaml",
            [{"name": "alpha", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}],
            extra={"job": {"error_rate_threshold": 0.01, "error_rate_window": 1}},
            max_attempts=1,
        )
        stopped = cli.run(*args[:3], str(dead), *args[4:])
        assert stopped.returncode == 3, stopped.stderr
        status = check_store_consistent(cli, n)
        assert status["pending"] >= n - 8  # a few failed before the error-rate stop
        done_before = status["succeeded"] + status["failed"]
        filler = _fill(small, 24 * 1024)
        done = cli.run(*args)
        assert done.returncode != 0, done.stdout
        line = one_error_line(done.stderr)
        assert "full" in line or "No space" in line, line
        filler.unlink()
        assert sqlite3.connect(cli.store).execute("PRAGMA integrity_check").fetchone() == ("ok",)
        status = check_store_consistent(cli, n)
        assert status["succeeded"] + status["failed"] >= done_before
        done = cli.run(*args)
        assert done.returncode in (0, 3, 4), done.stderr  # 4: the dead run's failures stay failed
        rows = read_jsonl(out)
        ids = [row["custom_id"] for row in rows]
        assert sorted(ids) == [f"item-{i:05d}" for i in range(n)]  # each exactly once, none lost
        assert check_store_consistent(cli, n)["pending"] == 0
