"""Batch mode: sending a job's tasks through the providers' Batch APIs (policy, ledger of open
batches, submitting, polling, collecting outcomes).

May import: the core, `config`, `tokens`, `trace_hooks`, `gateway` (the driver is handed one),
`providers.batch`, `providers.http` (its session), `jobs.store`, `jobs.input`, `jobs.output`,
`jobs.checks`, `jobs.progress`, `jobs.report`, and of the live path's pieces `jobs.engine_types`,
`jobs.budget_gate`, `jobs.guards` and `jobs.pricing`. Not `jobs.engine` or `jobs.live_task`.
"""
