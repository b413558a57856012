"""Durable jobs: a JSONL file of requests run to an output file, resumable after a crash.

Subpackages: `store` (the job store seam and its backends), `io` (input, output, progress, report),
`batch` (batch mode over the providers' Batch APIs). At the top level: the entry points (`runner`,
`cancel`, `plan`), job setup, the engine, live tasks, outcomes, group commit, budget and guards.

May import: the gateway and everything below it. Inside: entry points > setup > engine > modes >
commit/finish > io > store (enforced by import-linter).
"""
