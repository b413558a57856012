"""The batch APIs the official SDKs speak: OpenAI's Files (`files`) and Batches (`batches`: a batch
as a durable job — run, cancel, finalize, resume — its output and error files in `batch_files`, its
input checked by `input_problems`, OpenAI's object shapes in `shapes`), Anthropic's Message Batches
(`anthropic_api`), and the weighted shares of the gateway every running job gets (`priorities`).

May import: `tenancy`, `door`, `callbacks`, jobs, the gateway and everything below them.
"""
