"""Per-job exclusive locks held with `fcntl.flock` on a small file next to the job database.

The kernel drops a flock when its holder dies, so a run killed with SIGKILL never leaves a stale
lock behind. Locks are per open file description: a second attempt, even from the same process,
is refused. The lock file keeps the holder's pid for the error message. The holder removes it
when it lets go (a run that ends or is refused leaves nothing behind); as unlinking a locked file
races with the next opener, an opener that wins the lock checks that the file it locked is still
the one at the path (same inode), and tries again on a fresh file when it is not.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from pathlib import Path

from batchgate.errors import JobLockedError, StoreError

_SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")


def lock_path_for(db_path: Path, job_id: str) -> Path:
    """`<db>.<job>.lock`, or a hash of the job id when it is not a safe file-name part."""
    part = job_id if _SAFE_ID.fullmatch(job_id) else hashlib.sha256(job_id.encode()).hexdigest()[:32]
    return db_path.with_name(f"{db_path.name}.{part}.lock")


class JobLockFile:
    """One held flock; `release` is idempotent."""

    __slots__ = ("_fd", "job_id", "path")

    def __init__(self, path: Path, job_id: str) -> None:
        self.path = path
        self.job_id = job_id
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        while True:
            fd = self._lock_one()
            if _still_linked(fd, self.path):
                break
            os.close(fd)  # the holder we waited on removed this file: lock the new one
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def _lock_one(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot open the job lock file ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            by = f" (pid {holder})" if holder else ""
            raise JobLockedError(
                f"job {self.job_id!r} is locked by another batchgate run{by}; lock file {self.path}"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"{self.path}: cannot lock ({exc.strerror})") from None
        return fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            if _still_linked(fd, self.path):
                os.unlink(self.path)  # while still locked: a waiter then sees it gone and retries
        os.close(fd)  # closing the only descriptor drops the flock

    def __repr__(self) -> str:
        return f"JobLockFile({str(self.path)!r}, held={self.held})"


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _still_linked(fd: int, path: Path) -> bool:
    """True when `path` still names the file open on `fd`."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
