"""Webhooks when a job ends, as OpenAI sends them (Standard Webhooks): `signing` (`whsec_…`
secrets, the event body, the `webhook-signature` header), `guard` (the SSRF guard: which addresses
a callback may reach, resolved once and pinned), `addresses` (what an address reaches, embedded
IPv4 forms included), `sender` (one delivery attempt over HTTP, through the network settings'
proxy and CAs; only a 307/308 the guard passes again is followed). The server's durable outbox
(`server/callbacks`) and a local run's end (`jobs/lifecycle/callback`) both deliver through them.

May import: `batchgate.config` (its Secret, the network settings), `errors` and aiohttp; nothing
else of batchgate.
"""
