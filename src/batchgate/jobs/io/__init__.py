"""What a job reads and writes: the input file and its accepted shapes, the output lines, the output
check, progress counters and the report.

May import: the core, `config`, `stats`, `cache` and `jobs.store`. Not the engine, batch mode or the gateway.
"""
