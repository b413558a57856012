"""The native job API under `/v1/jobs`: its routes (`jobs_api`), its jobs run by the batches'
`Runs` with their own terms (`native`: create, schedule, pause, resume, retry; `JobTerms`), the
options parsed and checked (`job_spec`) and kept in `server.db` (`job_table`), and what a job
answers (`job_view`).

May import: `batch_api`, `tenancy`, `door`, `jobs`, `gateway` and everything below them.
"""
