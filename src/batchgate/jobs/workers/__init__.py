"""Workers: `batchgate worker` processes that share a job store and run submitted jobs' tasks in
chunks under fenced leases (`loop`), the lease renewer (`lease`) and `run --submit-only`, which
creates a job for them (`submit`).

May import: the core, `config`, `gateway`, `stats`, `quota.store` (where the shared quota is),
and in `jobs` the live path (`live_task`, `commit`,
`budget_gate`, `guards`), `finish`, `job_setup`,
`input`, `output`, `checks`, `progress`, `report` and `store`. Nothing in `jobs` imports it.
"""
