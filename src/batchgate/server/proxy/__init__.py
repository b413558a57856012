"""The live proxy: `POST /v1/chat/completions` and `POST /v1/messages` sent at once through the
shared gateway as urgent requests (`live`), their answers as server-sent events when asked
(`live_stream`).

May import: `batch_api` (Anthropic's message shape), `door`, `jobs.input` (a line's shapes, for an
Anthropic body), `gateway` and everything below it.
"""
