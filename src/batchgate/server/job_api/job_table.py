"""Native jobs' specs in `server.db`, beside the batch records that run them (a native job is a
batch record of kind `job`): one row per job with its name, priority and spec, and the list query
that joins both to filter by state, name, priority and metadata, newest first, after a cursor."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from batchgate.config.job_spec import JobSpec
from batchgate.server.tenancy.registry import BatchRecord
from batchgate.server.tenancy.sqlite_file import SqliteFile

KIND = "job"
# A job's state is its batch record's status, two of them renamed for the job API.
_RENAMED = {"validating": "queued", "in_progress": "running"}
STATES = ("scheduled", "queued", "running", "paused", "finalizing", "cancelling", "completed",
          "failed", "cancelled")  # fmt: skip
_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, owner TEXT NOT NULL,
    kind TEXT NOT NULL, status TEXT NOT NULL, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS job_specs (
    id TEXT PRIMARY KEY, name TEXT, priority TEXT NOT NULL, spec BLOB NOT NULL);
"""


def state(b: BatchRecord) -> str:
    return _RENAMED.get(b.status, b.status)


def status_of(job_state: str) -> str:
    """The batch record status of a job state."""
    return {v: k for k, v in _RENAMED.items()}.get(job_state, job_state)


@dataclass(frozen=True, slots=True)
class JobFilter:
    """What `GET /v1/jobs` asks for; None (or empty) matches every job."""

    owner: str | None = None
    statuses: tuple[str, ...] = ()
    name: str | None = None
    priority: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()


class JobTable(SqliteFile):
    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA, "job table")

    def add(self, job_id: str, spec: JobSpec) -> None:
        with self._sql() as c:
            c.execute(
                "INSERT INTO job_specs (id, name, priority, spec) VALUES (?, ?, ?, ?)",
                (job_id, spec.name, spec.priority, spec.to_blob().decode()),  # TEXT, for json_each
            )

    def get(self, job_id: str) -> JobSpec | None:
        with self._sql() as c:
            row = c.execute("SELECT spec FROM job_specs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else JobSpec.of_blob(row[0])

    def with_status(self, status: str) -> list[BatchRecord]:
        """The native jobs in `status`, oldest first."""
        with self._sql() as c:
            rows = c.execute(
                "SELECT record FROM batches WHERE kind = ? AND status = ? ORDER BY seq", (KIND, status)
            ).fetchall()
        return [BatchRecord.of_blob(r[0]) for r in rows]

    def page(
        self, f: JobFilter, limit: int, after: str | None
    ) -> tuple[list[tuple[BatchRecord, JobSpec]], bool]:
        """Up to `limit` jobs matching `f`, newest first, older than the job `after`; and whether
        more follow."""
        where, args = ["b.kind = ?"], [KIND]
        if f.owner is not None:
            where.append("b.owner = ?")
            args.append(f.owner)
        if f.statuses:
            where.append(f"b.status IN ({', '.join('?' for _ in f.statuses)})")
            args.extend(f.statuses)
        for column, value in (("j.name", f.name), ("j.priority", f.priority)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        for key, value in f.metadata:
            where.append("EXISTS (SELECT 1 FROM json_each(j.spec, '$.metadata') WHERE key = ? AND value = ?)")
            args.extend((key, value))
        if after is not None:
            where.append("b.seq < (SELECT seq FROM batches WHERE id = ?)")
            args.append(after)
        sql = (
            "SELECT b.record, j.spec FROM batches b JOIN job_specs j ON j.id = b.id"
            f" WHERE {' AND '.join(where)} ORDER BY b.seq DESC LIMIT ?"
        )
        with self._sql() as c:
            rows = c.execute(sql, (*args, limit + 1)).fetchall()
        found = [(BatchRecord.of_blob(r[0]), JobSpec.of_blob(r[1])) for r in rows[:limit]]
        return found, len(rows) > limit
