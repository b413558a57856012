"""Callbacks when a batch (or a native job) ends: Standard Webhooks signed with the owner key's
`whsec_…` secret, OpenAI's event types and body (`batch.completed`, `batch.failed`,
`batch.cancelled`, `batch.expired`), delivered at least once from a durable outbox in `server.db`.

Modules: `outbox` (the outbox and the secrets tables), `delivery` (`Callbacks`: record an end, the
retry schedule on clock timers, the outcome counters). Signing, the SSRF guard and one attempt
over HTTP are `batchgate.webhooks`' (a local `run` sends its callback with them too).

May import: the server's `tenancy` (its registry), `batchgate.webhooks`, `clock`, `errors` and what
lies below them; the server (service, batches, the job API) imports it.
"""
