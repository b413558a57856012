"""The native job API under `/v1/jobs`: its routes (`jobs_api`), its jobs run by the batch
machinery with their own options (`native`: schedule, pause, resume, retry), the options parsed
and checked (`job_spec`) and kept in `server.db` (`job_table`), what a job answers (`job_view`),
and the runs `/metrics` shows (`watch`).

May import: `batch_api`, `tenancy`, `door`, jobs, the gateway and everything below them.
"""
