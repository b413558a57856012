"""The batch APIs the official SDKs speak: OpenAI's Files (`files`) and Batches (`batches`: a batch
created over its input, checked by `input_problems`; its output and error files in `batch_files`;
OpenAI's object shapes in `shapes`), Anthropic's Message Batches (`anthropic_api`), and the runs
of every batch and native job (`runs`: run, cancel, expire, finalize, resume; what they share and
how each runs in `run_parts`; the weighted shares of the gateway in `priorities`; the runs
`/metrics` shows in `watch`).

May import: `tenancy`, `door`, `callbacks`, `jobs`, `gateway` and everything below them.
"""
