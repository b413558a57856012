"""Durable jobs: a JSONL file of requests run to an output file, resumable after a crash.

Subpackages by concept: `store` (the job store seam and its backends), `input` (what a job reads),
`output` (what it writes), `checks` (the output check), `progress` (a running job's figures and
their displays), `report` (the job report), `cache` (a job's side of the response cache), `batch`
(batch mode over the providers' Batch APIs), `graph`, `pack`, `lifecycle`, `workers`. At the top
level: the entry points (`runner`, `cancel`, `plan`), job setup, the input's one pass (`ingest`),
the engine, live tasks, group commit, budget and guards.

May import: `batchgate.gateway` and everything below it. Inside: entry points > setup > engine > modes >
commit/finish > report > cache > output > input | progress | checks > store (enforced by import-linter).
"""
