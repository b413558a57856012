"""Packing single-text embedding lines into one request each way: `group` (pure: which lines pack
together, the packed body, the answer split back per line) and `packer` (the engine's packer in
front of dispatch: holds lines, sends each pack under one slot through the live path, bisects a
pack the provider refuses).

May import: the core, `config`, `inflight`, `jobs.live_task`, `jobs.budget_gate` and
`jobs.store`. Not the engine (which imports it), batch mode or the gateway directly.
"""
