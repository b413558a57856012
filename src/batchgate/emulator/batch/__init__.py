"""The emulator's Batch APIs: OpenAI files + batches and Anthropic Message Batches, over one batch
engine (`core`) that runs each batch's items on the emulator's clock.

May import: `batchgate.emulator` (its other modules), `clock`, `errors`. Nothing of the client side.
"""
