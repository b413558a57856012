"""Callbacks when a batch (or a native job) ends: Standard Webhooks signed with the owner key's
`whsec_…` secret, OpenAI's event types and body (`batch.completed`, `batch.failed`,
`batch.cancelled`, `batch.expired`), delivered at least once from a durable outbox in `server.db`.

Modules: `signing` (secrets, the event body, the `webhook-signature` header), `guard` (the SSRF
guard: which addresses a callback may reach, resolved once and pinned), `outbox` (the outbox and
the secrets tables), `sender` (one delivery attempt over HTTP), `delivery` (`Callbacks`: record an
end, the retry schedule on clock timers, the outcome counters).

May import: the server's `tenancy` (its registry), clock, errors and what lies below them; the server
(service, batches, the job API) imports it.
"""
