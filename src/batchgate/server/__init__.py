"""`batchgate serve`: one long-running process that owns every provider's quota pool (one
`Gateway`) and runs many durable jobs at once from the job store, behind an OpenAI-compatible
Files + Batches API (and Anthropic's Message Batches) with bearer keys.

Modules: `service` (the process: gateway, store, registry, HTTP), `app` (the endpoints, auth,
OpenAI-shaped errors), `anthropic_api` (Message Batches), `batches` (a batch as a job: run,
cancel, finalize, resume), `files`, `registry` (keys, files and batch records in `server.db`),
`keys`, `shapes` (OpenAI's objects), `callbacks/` (signed webhooks when a batch or job ends, from a
durable outbox, behind an SSRF guard); the native job API: `jobs_api` (`/v1/jobs`), `native` (jobs
on top of `batches`: schedule, pause, resume, retry), `job_spec`, `job_table`, `job_view`,
`priorities` (weighted shares of the gateway), `openapi` and `openapi_schemas` (`/openapi.json`);
`metrics_route` (`/metrics`, no key) and `watch` (the runs it shows).

May import: jobs, the gateway and everything below them; nothing imports it but the CLI. It never
imports the emulator (which must stay independent of the client side).
"""
