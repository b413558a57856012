"""Finding the job a command names: its id, the id a server's API gave it (`batch_…`, `job_…`,
`msgbatch_…`), a unique prefix of either, or (none given) the latest."""

from __future__ import annotations

from batchgate.errors import JobError
from batchgate.jobs.store.protocol import JobRecord, JobStore


def api_id(job: JobRecord) -> str | None:
    """The id a server's API knows the job by (None: a job made by `run` or `submit-only`)."""
    return job.options.api_id


async def find_job(store: JobStore, job_id: str | None) -> JobRecord:
    """The job named by `job_id` (its id or API id, exact or a unique prefix), or the most
    recently updated one."""
    if job_id is None:
        jobs = await store.list_jobs()
        if not jobs:
            raise JobError("the store has no jobs")
        return max(jobs, key=lambda j: j.updated_at)
    job = await store.get_job(job_id)
    if job is not None:
        return job
    jobs = await store.list_jobs()
    for j in jobs:
        if api_id(j) == job_id:
            return j
    matches = [j for j in jobs if j.job_id.startswith(job_id) or (api_id(j) or "").startswith(job_id)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(j.job_id for j in matches[:5])
        raise JobError(f"job prefix {job_id!r} is ambiguous: it matches {names}")
    raise JobError(f"no job {job_id!r} in the store (see `batchgate jobs`)")
