"""Batch API clients: OpenAI's Batch API (files + batches) and Anthropic's Message Batches, behind
one `BatchClient` seam.

May import: the core, `config`, `policy` (its polling) and the live provider modules
(`providers`). Not `jobs`.
"""
