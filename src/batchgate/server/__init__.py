"""`batchgate serve`: one long-running process that owns every provider's quota pool (one
`Gateway`) and runs many durable jobs at once from the job store, behind an OpenAI-compatible
Files + Batches API (and Anthropic's Message Batches), a native job API and a live proxy, with
bearer keys.

By concern, top to bottom (an import-linter layers contract holds the order): `service` (the
process: gateway, store, registry, HTTP) and `app` (the endpoints, auth, OpenAI-shaped errors)
wire the rest; `views/` (dashboard, `/metrics`, `/openapi.json`); `proxy/` (the live proxy) and
`job_api/` (`/v1/jobs`); `batch_api/` (OpenAI's Files and Batches, Anthropic's Message Batches: a
batch as a job); `callbacks/` (signed webhooks when a batch or job ends, from a durable outbox,
behind an SSRF guard); `tenancy/` (keys, the records in `server.db`) and `door/` (body bounds,
request bodies and query values checked).

May import: `observe`, `web`, `jobs`, `gateway` and everything below them; nothing imports it but
the CLI. Never `emulator` (which must stay independent of the client side).
"""
