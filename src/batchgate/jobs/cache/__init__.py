"""A job's side of the response cache: which tasks' answers may be reused, the answers found for
a chunk of tasks at once, those paid for put back, and the figures the report tells (`cached`);
a hit's OUT line built from the entry's stored bytes (`cached_line`).

May import: the core, `batchgate.cache`, `batchgate.config`, `batchgate.gateway_cache`,
`batchgate.jobs.output`, `batchgate.jobs.store`. Not the engine, batch mode or the gateway.
"""
