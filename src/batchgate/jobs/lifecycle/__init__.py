"""What a job's own options do around a run of `batchgate run` or `batchgate.Job` (the server
does the same with its own machinery: a `scheduled` timer, the callback outbox): `start` — wait for
the job's `not_before` on the injected clock, saying so; `callback` — the job's end posted to its
`callback_url` (Standard Webhooks, signed with the secret `callback_secret_env` names, through the
SSRF guard of `batchgate.webhooks`).

May import: the core, `config`, `batchgate.webhooks`. Not the engine, batch mode or the gateway.
"""
