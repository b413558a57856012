"""Batch mode: sending a job's tasks through the providers' Batch APIs (policy, ledger of open
batches, submitting, polling, collecting outcomes).

May import: the core, `config`, `providers.batch`, `jobs.store` and `jobs.io`. Not the live engine.
"""
